// tasks/: the built-in sequence tasks and their held-out evaluation, so that a Python
// training loop sees exactly the batches and the score of the C++ trainer.
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "numpy_convert.hpp"
#include "py_errors.hpp"
#include "tasks/evaluate.hpp"
#include "tasks/tasks.hpp"

namespace tapegrad::python {

void bind_tasks(py::module_& m) {
  using namespace tapegrad::tasks;
  m.attr("IGNORE") = kIgnore;
  py::class_<Batch>(m, "Batch", "tokens (B, T) and targets (B, T), IGNORE where there is no loss")
      .def_property_readonly("tokens", [](const Batch& b) { return indices_to_numpy(b.tokens); })
      .def_property_readonly("targets", [](const Batch& b) { return indices_to_numpy(b.targets); });
  py::class_<Example>(m, "Example")
      .def_readonly("input", &Example::input)
      .def_readonly("answer", &Example::answer);
  py::class_<EvalResult>(m, "EvalResult")
      .def_readonly("loss", &EvalResult::loss)
      .def_readonly("token_accuracy", &EvalResult::token_accuracy)
      .def_readonly("exact_accuracy", &EvalResult::exact_accuracy)
      .def_readonly("sequences", &EvalResult::sequences)
      .def_readonly("tokens", &EvalResult::tokens);
  py::class_<SequenceTask>(m, "SequenceTask")
      .def(py::init([](const std::string& name) {
        if (!SequenceTask::known(name))
          fail("SequenceTask", "unknown task '{}' (sort, reverse or recall)", name);
        return SequenceTask::make(name);
      }), py::arg("name"))
      .def_property_readonly("name", &SequenceTask::name)
      .def_property_readonly("vocab_size", &SequenceTask::vocab_size)
      .def_property_readonly("context", &SequenceTask::context)
      .def_property_readonly("input_len", &SequenceTask::input_len)
      .def_property_readonly("answer_len", &SequenceTask::answer_len)
      .def("train_batch", [](const SequenceTask& t, std::size_t batch, Generator& gen, std::size_t step) {
        return t.train_batch(batch, gen, step);
      }, py::arg("batch"), py::arg("generator"), py::arg("step"),
      "The trainer's batch for optimiser step `step` (0-based), drawn from the generator")
      .def("sample_eval", &SequenceTask::sample_eval, py::arg("generator"))
      .def("sample_train", py::overload_cast<Generator&>(&SequenceTask::sample_train, py::const_),
           py::arg("generator"))
      .def("solve", &SequenceTask::solve, py::arg("input"))
      .def("is_held_out", &SequenceTask::is_held_out, py::arg("input"))
      .def("make_batch", &SequenceTask::make_batch, py::arg("examples"));
  m.def("batch_examples", &batch_examples, py::arg("task"), py::arg("examples"), py::arg("batch"));
  m.def("evaluate", [](const py::object& model_arg, const py::object& batches_arg) {
    if (!py::isinstance<Transformer<float>>(model_arg))
      wrong_type("evaluate", "model", "a float32 Transformer (nn.load_checkpoint(path) reads "
                 "a checkpoint back in float32)", model_arg);
    std::vector<Batch> batches;
    try {
      batches = batches_arg.cast<std::vector<Batch>>();
    } catch (const py::cast_error&) {
      wrong_type("evaluate", "batches", "a list of tasks.Batch (tasks.held_out(task))", batches_arg);
    }
    Transformer<float>& model = model_arg.cast<Transformer<float>&>();
    py::gil_scoped_release release;
    return evaluate(model, batches);
  }, py::arg("model"), py::arg("batches"),
  "Teacher-forced held-out loss, token and exact accuracy (float32 models)");
}

}  // namespace tapegrad::python
