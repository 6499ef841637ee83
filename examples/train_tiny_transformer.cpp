// train_tiny_transformer: the main job of tapegrad. Its code is apps/train/ (program.cpp
// parses the command line and runs it), a library that tests/ link too.
#include "apps/train/program.hpp"

int main(int argc, char** argv) { return tapegrad::train::train_program(argc, argv); }
