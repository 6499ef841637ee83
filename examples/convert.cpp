// convert: a model from one format to the other, either way:
//   convert out/train/model.npz out/hf        a checkpoint -> a Hugging Face folder
//   convert path/to/hf-folder model.npz        a Hugging Face folder -> a checkpoint
// An output ending in .npz is a checkpoint, anything else a folder (created if missing).
// A text model's tokenizer goes with it (tokenizer.json in a folder).
//
// Exit codes: 0 done; 1 a runtime failure (a write); 2 a usage error (bad option, an input
// that does not load, a model the output format cannot express). Nothing is written on 2.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <string>

#include <CLI/CLI.hpp>

#include "apps/common/cli.hpp"
#include "apps/common/program_errors.hpp"
#include "apps/common/memory_budget.hpp"
#include "apps/common/model_file.hpp"
#include "apps/common/model_source.hpp"
#include "apps/common/run_options.hpp"
#include "nn/config.hpp"
#include "nn/io/pretrained.hpp"

using namespace tapegrad;
using apps::UsageError;

namespace {

constexpr const char* kProgram = "convert";

struct Settings {
  std::string in, out;
  bool allow_nonfinite = false;
};

bool same_place(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec);
}

apps::LoadedModel load(const std::string& path) {
  try {
    return apps::load_model(path);
  } catch (const std::exception& e) {
    throw UsageError(path + ": " + apps::one_line(e.what()));
  }
}

// OUT names a folder or a checkpoint by its extension; something else already there is a
// usage error, said before the model is read.
void check_out(const std::string& out, bool to_folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  if (to_folder && !fs::is_directory(out, ec))
    throw UsageError("OUT " + out + " is a file: a Hugging Face folder goes into a folder "
                     "(OUT ending in .npz writes a checkpoint)");
  if (!to_folder && fs::is_directory(out, ec))
    throw UsageError("OUT " + out + " is a folder: a checkpoint is a file (OUT without .npz "
                     "writes a Hugging Face folder)");
}

int run(const Settings& s) {
  if (same_place(s.in, s.out)) throw UsageError("OUT " + s.out + " is IN: write elsewhere");
  const bool to_folder = std::filesystem::path(s.out).extension() != ".npz";
  check_out(s.out, to_folder);
  apps::LoadedModel m = load(s.in);
  apps::require_finite_parameters(m.model, s.in, s.allow_nonfinite);
  if (to_folder) {  // refused before anything is written: a model no model_type expresses
    const std::string why = apps::hf_export_refusal(m.model.config(), m.kept_json);
    if (!why.empty()) throw UsageError(s.in + " has no Hugging Face form: " + why);
  }
  const std::string note = apps::save_model(m.model, m.task, m.coder ? &*m.coder : nullptr,
                                                s.out, m.kept_json);
  const TransformerConfig& c = m.model.config();
  std::printf("%s: wrote %s (%s, %zu layers, d_model %zu, vocab %zu%s)\n", kProgram, s.out.c_str(),
              to_folder ? "Hugging Face folder" : "checkpoint", c.layers, c.d_model, c.vocab,
              m.coder ? (std::string(", ") + m.coder->kind() + " tokenizer").c_str() : "");
  if (!note.empty()) std::printf("%s: note: %s\n", kProgram, note.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  apps::prepare_process();
  Settings s;
  CLI::App app{"Convert a model between a tapegrad checkpoint (.npz) and a Hugging Face folder.",
               kProgram};
  app.add_option("IN", s.in, "a checkpoint (.npz) or a Hugging Face model folder")->required();
  app.add_option("OUT", s.out, "OUT.npz: a checkpoint; anything else: a Hugging Face folder")
      ->required();
  apps::add_allow_nonfinite_option(app, s.allow_nonfinite);
  if (std::optional<int> code = apps::parse_command_line(app, argc, argv, kProgram))
    return *code;
  return apps::run_reporting_errors(kProgram, [&] { return run(s); });
}
