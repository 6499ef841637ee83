#pragma once
// What Python's save writes and load refuses beyond the weights, by the C++ trainer's
// rules, so that a checkpoint from Python is one the programs treat like their own.
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "nn/io/npz.hpp"

namespace tapegrad::python {

namespace py = pybind11;

// The trainer's `__config__.train_task` entry for `task`: a tasks.SequenceTask or its name
// ("sort", "reverse", "recall"); none for None. generate reads it to take a task prompt
// and print the answer. An unknown name is a ShapeError, another type a TypeError.
// A task whose vocabulary or context differs from the model's (vocab, context) is a
// ShapeError: generate would read its prompts with a model that cannot take them.
std::vector<NpzEntry> task_entries(const py::object& task, std::size_t vocab,
                                   std::size_t context);

// CheckpointError naming the first parameter of the file that holds NaN or Inf, its
// shape, the value and the element, before anything is loaded: the programs' rule, the
// one check of nn/io/finite_weights.hpp.
void refuse_nonfinite_parameters(const std::string& path);

}  // namespace tapegrad::python
