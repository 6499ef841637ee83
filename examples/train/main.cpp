// train_tiny_transformer: the main job of tapegrad (examples/train/program.cpp).
#include "examples/train/program.hpp"

int main(int argc, char** argv) { return tapegrad::train::train_program(argc, argv); }
