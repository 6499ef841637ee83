#include "checkpoint_rules.hpp"

#include "autograd/errors.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/io/finite_weights.hpp"
#include "py_errors.hpp"
#include "tasks/tasks.hpp"

namespace tapegrad::python {

std::vector<NpzEntry> task_entries(const py::object& task, std::size_t vocab,
                                   std::size_t context) {
  if (task.is_none()) return {};
  std::string name;
  if (py::isinstance<tasks::SequenceTask>(task))
    name = task.cast<const tasks::SequenceTask&>().name();
  else if (py::isinstance<py::str>(task)) name = task.cast<std::string>();
  else wrong_type("save", "task", "a tasks.SequenceTask, its name or None", task);
  if (!tasks::SequenceTask::known(name))
    fail("save", "unknown task '{}' (sort, reverse or recall)", name);
  const tasks::SequenceTask made = tasks::SequenceTask::make(name);
  if (made.vocab_size() != vocab || made.context() != context)
    fail("save", "the task '{}' needs vocab {} and context {}, the model has {} and {}", name,
         made.vocab_size(), made.context(), vocab, context);
  return {tasks::task_entry(name)};
}

void refuse_nonfinite_parameters(const std::string& path) {
  const std::string why = nonfinite_parameter(load_npz(path), "allow_nonfinite=True");
  if (!why.empty()) fail_with<CheckpointError>(path, "{}", why);
}

}  // namespace tapegrad::python
