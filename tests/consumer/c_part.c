/* A C file in the same target as the C++ program: nothing tapegrad exports (compile
 * options, forced includes) may reach the C compiler. */
int consumer_c_answer(void) { return 42; }
