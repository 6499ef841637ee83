#pragma once
// train_tiny_transformer's command line and run (apps/train/program.cpp): in the
// trainer's library, so that the batch compiling the trainer's files parses their headers
// (xtensor, CLI11, nlohmann-json) once for it too.

namespace tapegrad::train {

// The whole program: parses argv, trains, writes --out; returns the exit code.
int train_program(int argc, char** argv);

}  // namespace tapegrad::train
