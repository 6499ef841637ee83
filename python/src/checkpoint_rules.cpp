#include "checkpoint_rules.hpp"

#include <xtensor/xadapt.hpp>

#include <type_traits>

#include "autograd/errors.hpp"
#include "nn/io/checkpoint.hpp"
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
  for (const NpzEntry& e : load_npz(path)) {
    if (e.name.rfind(kConfigPrefix, 0) == 0 || e.name.rfind(kTrainingPrefix, 0) == 0) continue;
    std::visit([&](const auto& a) {
      using V = typename std::decay_t<decltype(a)>::value_type;
      if constexpr (std::is_floating_point_v<V>) {
        const std::string why = nonfinite_value(e.name, shape_str(e.shape()), a.data(), a.size());
        if (!why.empty())
          fail_with<CheckpointError>(path, "parameter {} (allow_nonfinite=True loads it anyway)", why);
      }
    }, e.array);
  }
}

}  // namespace tapegrad::python
