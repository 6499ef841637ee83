#pragma once
// The parts of the module, one file each; module.cpp calls them in this order.
#include <pybind11/pybind11.h>

namespace tapegrad::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_tensor(py::module_& m);    // Tensor, tensor(), Generator, operators
void bind_ops(py::module_& m);       // every op of ops/ under its C++ name
void bind_autograd(py::module_& m);  // no_grad, anomaly mode, gradcheck, the tape
void bind_nn(py::module_& m);        // config, Transformer, optimisers, schedule, checkpoints
// attention_weights/mix/scores, flash_attention, attention_decode; nn's KVCache classes
void bind_decode(py::module_& m, py::module_& nn);
void bind_hooks(py::module_& m);        // run_with_cache, run_with_hooks, ActivationCache
void bind_tasks(py::module_& m);        // the built-in tasks and their evaluation
void bind_text(py::module_& m);         // Tokenizer: byte-level BPE (text/)
void bind_safetensors(py::module_& m);  // read_safetensors, write_safetensors
void bind_pretrained(py::module_& nn);  // Hugging Face model folders (after bind_nn)

}  // namespace tapegrad::python
