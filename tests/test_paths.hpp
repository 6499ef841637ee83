#pragma once
// Where the build keeps what the tests read and run: the fixtures, the source and build
// folders, and each program the program tests start. TAPEGRAD_FIXTURES_DIR,
// TAPEGRAD_SOURCE_DIR, TAPEGRAD_BINARY_DIR and TAPEGRAD_<PROGRAM>_BIN name these constants
// (tests/CMakeLists.txt defines a program's macro only when the program is built). Their
// values are absolute paths, so they are defined in one file that CMake generates in the
// build folder: on every test file's compile line they would make each clone's objects
// differ, and ccache would compile the whole suite again for every fresh clone.
namespace tapegrad::test::paths {

extern const char* const fixtures_dir;
extern const char* const source_dir;
extern const char* const binary_dir;

extern const char* const convert;
extern const char* const generate;
extern const char* const gradcheck;
extern const char* const induction;
extern const char* const logits;
extern const char* const model_card;
extern const char* const rss_growth;
extern const char* const saturation;
extern const char* const tokenizer;
extern const char* const train_tiny_transformer;

}  // namespace tapegrad::test::paths
