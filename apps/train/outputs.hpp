#pragma once
// What a finished run leaves in --out: model.npz (parameters, configuration, task and a
// text model's vocabulary), metrics.json, loss.csv, loss.svg, a BPE model's tokenizer
// (tokenizer.bpe, or tokenizer.json when its ids are not minbpe's) and, for a text model
// with --sample, sample.txt. Every file is written atomically.
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "apps/train/model_check.hpp"
#include "apps/train/options.hpp"
#include "apps/train/report.hpp"
#include "apps/train/setup.hpp"
#include "apps/train/training.hpp"
#include "nn/io/npz.hpp"
#include "nn/transformer.hpp"

namespace tapegrad::train {

// The entries a checkpoint holds besides the parameters: the configuration, the task's
// name and a text model's vocabulary.
std::vector<NpzEntry> model_entries(const Transformer<float>& model, const TaskSetup& task);

struct RunSummary {
  const Settings& settings;
  const TaskSetup& task;
  const Transformer<float>& model;
  const TrainingProgress& progress;
  const FinalReport& report;
  const GradcheckSummary& gradcheck;
  std::size_t resumed_at_step = 0;  // the training checkpoint's step (0: a fresh run)
};

// metrics.json's text.
std::string metrics_json(const RunSummary& run);
// Writes every output file and prints the closing line on `log`.
void write_outputs(const RunSummary& run, std::FILE* log);

}  // namespace tapegrad::train
