#pragma once
// exp over a few elements at once, giving exactly the numbers std::exp gives one by one.
#include <cstddef>

namespace tapegrad::kernels {

// In place: x[i] <- std::exp(x[i]) for i < n, bit for bit. For float this is glibc's expf
// (the algorithm of every glibc since 2.27) run on a vector of doubles, which is several
// times faster than n calls; where glibc branches (|x| >= 88, inf, nan) the element goes to
// std::exp itself. glibc picks a variant with fused multiply-adds on CPUs that have them;
// this file fuses when compiled for FMA (the default -march=native build). Where the two
// choices differ (a build without FMA on a CPU with it) a result may differ in the last
// bit. For double it is n calls to std::exp.
//
// Why: vectorised loops (softmax) leave a tail of up to one SIMD width, whose exponentials
// were std::exp calls. At T = 16 with AVX-512 that tail is almost every element, and
// replacing it with anything but std::exp's own numbers would change every trained model.
void exp_as_std_inplace(float* x, std::size_t n);
void exp_as_std_inplace(double* x, std::size_t n);

}  // namespace tapegrad::kernels
