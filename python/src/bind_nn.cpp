// nn/: the configuration (its fields read from the one list in nn/config.hpp, never named
// here), the Transformer in float32 and float64, AdamW/SGD, clipping, the schedule,
// checkpoints and generation.
#include <pybind11/stl.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>

#include "arith.hpp"  // number_of
#include "autograd/memory.hpp"
#include "attention_path.hpp"
#include "bindings.hpp"
#include "checkpoint_rules.hpp"
#include "memory_budget.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/config.hpp"
#include "nn/generation.hpp"
#include "nn/kv_cache.hpp"
#include "nn/optim.hpp"
#include "nn/schedule.hpp"
#include "nn/transformer.hpp"
#include "numpy_convert.hpp"

namespace tapegrad::python {
namespace {

const FieldInfo* find_field(const std::string& name) {
  for (const FieldInfo& f : config_fields())
    if (name == f.name) return &f;
  return nullptr;
}

py::object get_field(const TransformerConfig& c, const std::string& name) {
  const FieldInfo* f = find_field(name);
  if (!f) throw py::attribute_error("Config has no field '" + name + "'");
  switch (f->kind) {
    case FieldInfo::Kind::size: return py::int_(field_to_int64(c, name));
    case FieldInfo::Kind::seed: return py::int_(std::uint64_t(field_to_int64(c, name)));
    case FieldInfo::Kind::flag: return py::bool_(field_to_int64(c, name) != 0);
    case FieldInfo::Kind::real: return py::float_(field_to_double(c, name));
    case FieldInfo::Kind::choice: return py::str(field_to_string(c, name));
    case FieldInfo::Kind::optional_real: {
      const double v = field_to_double(c, name);
      return std::isnan(v) ? py::object(py::none()) : py::object(py::float_(v));
    }
  }
  return py::none();
}

// Python's and NumPy's bools (np.bool_ is no int subclass).
bool is_bool(const py::handle& v) { return PyBool_Check(v.ptr()) || type_name(v) == "bool_"; }

// An integer (int, np.int64, ...; a bool only where `bool_ok`) as a Python int, or nullopt.
std::optional<py::int_> integer_of(const py::handle& v, bool bool_ok) {
  if (is_bool(v)) return bool_ok ? std::optional<py::int_>(py::int_(v.cast<bool>())) : std::nullopt;
  if (!PyIndex_Check(v.ptr())) return std::nullopt;
  return py::reinterpret_steal<py::int_>(PyNumber_Index(v.ptr()));
}

// The value of a field of kind size, flag or seed: an integer that fits.
std::int64_t integer_field(const FieldInfo& f, const py::object& value) {
  const bool flag = f.kind == FieldInfo::Kind::flag;
  const std::optional<py::int_> i = integer_of(value, flag);
  if (!i) wrong_type("config", f.name, flag ? "a bool" : "an integer", value);
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i->ptr(), &overflow);
  if (f.kind == FieldInfo::Kind::seed) {
    const unsigned long long u = PyLong_AsUnsignedLongLong(i->ptr());
    if (PyErr_Occurred()) {
      PyErr_Clear();
      fail("config", "seed={} is not in [0, 2^64)", py::repr(value).cast<std::string>());
    }
    return std::int64_t(u);  // the bit pattern, as the checkpoint stores it
  }
  if (overflow) fail("config", "{}={} is out of range", f.name, py::repr(value).cast<std::string>());
  return v;
}

double real_field(const FieldInfo& f, const py::object& value) {
  const std::optional<double> v = is_bool(value) ? std::nullopt : number_of(value);
  const bool optional = f.kind == FieldInfo::Kind::optional_real;
  if (!v) wrong_type("config", f.name, optional ? "a number or None" : "a number", value);
  return *v;
}

void set_field(TransformerConfig& c, const std::string& name, const py::object& value) {
  const FieldInfo* f = find_field(name);
  if (!f) throw py::attribute_error("Config has no field '" + name + "'");
  switch (f->kind) {
    case FieldInfo::Kind::size:
    case FieldInfo::Kind::flag:
    case FieldInfo::Kind::seed: return set_field_from_int64(c, name, integer_field(*f, value));
    case FieldInfo::Kind::real: return set_field_from_double(c, name, real_field(*f, value));
    case FieldInfo::Kind::choice:
      if (!py::isinstance<py::str>(value))
        wrong_type("config", name, fmt::format("one of '{}'", fmt::join(f->choices, "', '")), value);
      return set_field_from_string(c, name, value.cast<std::string>());
    case FieldInfo::Kind::optional_real:
      return set_field_from_double(c, name, value.is_none() ? std::numeric_limits<double>::quiet_NaN()
                                                            : real_field(*f, value));
  }
}

// validate(), except that a field without a usable default (vocab, context) left unset is
// named as missing after whatever is wrong with the fields that were set, rather than
// reported alone as "context=0 is not a number in [1, ...]".
void check_config(const TransformerConfig& c) {
  const TransformerConfig defaults = gpt2_preset();
  TransformerConfig probe = c;
  std::vector<std::string> unset;
  for (const FieldInfo& f : config_fields()) {
    if (f.kind != FieldInfo::Kind::size) continue;
    const std::int64_t v = field_to_int64(c, f.name);
    if (v == field_to_int64(defaults, f.name) && double(v) < f.min) {
      unset.push_back(f.name);
      set_field_from_int64(probe, f.name, std::int64_t(f.max));
    }
  }
  if (unset.empty()) return c.validate();
  const std::string missing = fmt::format("{} {} not set (no default)", fmt::join(unset, " and "),
                                          unset.size() == 1 ? "is" : "are");
  try {
    probe.validate();
  } catch (const ShapeError& e) {
    const std::string what = e.what(), prefix = "config: ";
    const std::string problem = what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
    fail("config", "{}; {}", problem, missing);
  }
  fail("config", "{}", missing);
}

// A UserWarning with this text (an exception set by a filter that makes it an error
// propagates).
void warn_user(const std::string& text) {
  if (PyErr_WarnEx(PyExc_UserWarning, text.c_str(), 1) != 0) throw py::error_already_set();
}

TransformerConfig with_fields(TransformerConfig c, const py::kwargs& fields) {
  for (auto [k, v] : fields) set_field(c, k.cast<std::string>(), py::reinterpret_borrow<py::object>(v));
  return c;
}

// A given field that changes nothing in the finished c (rope_theta without RoPE) gets a
// UserWarning: a dict of fields shared between configurations is a common way to build
// them, so not an error.
TransformerConfig warn_if_inapplicable(const TransformerConfig& c, const py::kwargs& fields) {
  const auto why = inapplicable_given_field(
      c, [&](const std::string& f) { return fields.contains(f); },
      [](const std::string& f) { return f; });
  if (why) warn_user("Config: " + *why + ", so it changes nothing");
  return c;
}

// generate's arguments that change nothing in the call, each a UserWarning. An argument
// away from its default counts as given (the seed cannot be told from its default).
void warn_unused_generate_options(const GenerateOptions& o) {
  const GenerateOptions defaults;
  const auto given = [&](const std::string& name) {
    if (name == "top_k") return o.sampling.top_k != defaults.sampling.top_k;
    if (name == "top_p") return o.sampling.top_p != defaults.sampling.top_p;
    if (name == "prefill_chunk") return o.prefill_chunk != defaults.prefill_chunk;
    if (name == "kv_dtype") return o.kv_dtype != defaults.kv_dtype;
    return false;
  };
  for (const InapplicableOption& u : inapplicable_generate_options(o, given)) {
    const bool cache = u.needs == InapplicableOption::Needs::cache;
    warn_user(fmt::format("generate: {} applies to {} only, and {}, so it changes nothing", u.name,
                          cache ? "the KV cache" : "sampling",
                          cache ? "use_cache=False" : "temperature=0 is greedy"));
  }
}

// generate's default at_context='stop' returns fewer tokens than asked for once the
// context is full: said, with the way to go on (docs/GENERATION.md, "At the context limit").
void warn_stopped_at_context(const GenerateResult& r, std::size_t asked, std::size_t context) {
  warn_user(fmt::format("generate: stopped after {} of {} new tokens: the context of {} "
                        "positions is full (a prompt of {} tokens); at_context='slide' goes on, "
                        "re-reading the newest {} tokens each time the context fills",
                        r.tokens.size(), asked, context, r.prompt_tokens,
                        std::max<std::size_t>(context / 2, 1)));
}

void bind_config(py::module_& m) {
  py::class_<TransformerConfig> c(m, "Config",
                                  "The model configuration: every field of nn/config.hpp as an "
                                  "attribute (Config.fields() lists them); defaults are gpt2's.");
  c.def(py::init([](const py::kwargs& kw) {
         return warn_if_inapplicable(with_fields(gpt2_preset(), kw), kw);
       }))
      .def_static("preset", [](const std::string& name, const py::kwargs& kw) {
        TransformerConfig cfg = with_fields(preset(name), kw);
        finish_preset(name, cfg, [&](const std::string& f) { return kw.contains(f); });
        return warn_if_inapplicable(cfg, kw);
      }, py::arg("name"), "'gpt2', 'llama', 'mixtral', 'gemma2' or 'bloom', then the given fields, then the preset's size rules")
      .def_static("preset_names", &preset_names)
      .def_static("fields", [] {
        std::vector<std::string> names;
        for (const FieldInfo& f : config_fields()) names.push_back(f.name);
        return names;
      })
      .def_static("field_doc", [](const std::string& name) {
        const FieldInfo* f = find_field(name);
        if (!f) throw py::key_error(name);
        return std::string(f->doc);
      })
      .def("__getattr__", &get_field)
      .def("__setattr__", &set_field)
      .def("validate", &check_config)
      .def("copy", [](const TransformerConfig& cfg) { return cfg; })
      .def("count_parameters", [](const TransformerConfig& cfg) { return count_parameters(cfg).total(); })
      .def("count_active_parameters", [](const TransformerConfig& cfg) { return count_parameters(cfg).active(); },
           "what one token uses: the total less the experts a token skips")
      .def("__eq__", [](const TransformerConfig& a, const TransformerConfig& b) { return a == b; })
      .def("__repr__", [](const TransformerConfig& cfg) { return "Config(" + config_summary(cfg) + ")"; });
}

template <class T>
std::vector<Tensor<T>> tensors_of(const char* op, const std::vector<PyTensor>& params) {
  std::vector<Tensor<T>> out;
  for (const PyTensor& p : params) {
    if (p.is_double() != std::is_same_v<T, double>)
      fail(op, "every parameter must have one dtype; got {} and {}", params[0].dtype(), p.dtype());
    out.push_back(p.get<T>());
  }
  return out;
}

AtContext at_context_of(const std::string& s) {
  if (s == "stop") return AtContext::stop;
  if (s == "slide") return AtContext::slide;
  fail("generate", "at_context must be 'stop' or 'slide', not '{}'", s);
}

// model.forward(tokens) and model(tokens): the ids are read with the GIL held, the
// forward runs without it.
// With a cache: the new tokens at positions cache.length.. , each layer reading and
// extending its own cache (a prompt in one call or in chunks, then one token at a time).
template <class T>
PyTensor forward_tokens(Transformer<T>& model, const py::object& tokens, KVCacheSet<T>* cache) {
  const Indices ids = indices_from_numpy(tokens, "forward");
  py::gil_scoped_release release;
  return PyTensor(cache ? model.forward(ids, *cache) : model.forward(ids));
}

template <class T>
double held_bytes(const Transformer<T>& model) {
  return double(count_parameters(model.config()).total()) * sizeof(T);
}

// Python's holder of a model or an optimiser: deleting one hands what it held back to the
// system (glibc keeps freed memory for reuse otherwise: autograd/memory.hpp).
template <class X>
struct TrimAfterDelete {
  void operator()(X* x) const {
    const double bytes = held_bytes(*x);
    delete x;
    trim_after_freeing(bytes);
  }
};
template <class X>
using TrimmingHolder = std::unique_ptr<X, TrimAfterDelete<X>>;

template <class T>
void bind_transformer(py::module_& m, const char* name) {
  using Model = Transformer<T>;
  // dynamic attributes: a model from Transformer.from_pretrained keeps hf_model_type and
  // hf_kept_json (python/tapegrad/nn.py), what its save_pretrained writes back
  py::class_<Model, TrimmingHolder<Model>>(m, name, py::dynamic_attr())
      .def(py::init([](const TransformerConfig& config) {
        check_config(config);
        const std::uint64_t params = count_parameters(config).total();
        require_memory("Transformer", fmt::format("{} parameters need", params),
                       double(params) * sizeof(T),
                       fmt::format("in {} for the weights alone (training adds their gradients "
                                   "and AdamW's two moments: 4 times as much)", dtype_name<T>()));
        return TrimmingHolder<Model>(new Model(config));
      }), py::arg("config"))
      .def("forward", &forward_tokens<T>, py::arg("tokens"), py::arg("cache") = nullptr,
           "tokens (B, T) -> logits (B, T, vocab); with cache, of the new positions only")
      .def("__call__", &forward_tokens<T>, py::arg("tokens"), py::arg("cache") = nullptr)
      .def("kv_cache", [](const Model& model, std::size_t batch, std::optional<std::size_t> positions,
                          const std::string& kv_dtype) {
        return KVCacheSet<T>(model.config(), batch, positions.value_or(model.config().context),
                             kv_dtype_from_name(kv_dtype));
      }, py::arg("batch") = 1, py::arg("positions") = py::none(), py::arg("kv_dtype") = "f32",
      "an empty KVCacheSet for this model (positions: the context by default; kv_dtype: f32, "
      "the model's type, or bf16, half the memory, float32 models)")
      .def("loss", [](Model& model, const py::object& tokens, const py::object& targets, std::int64_t ignore,
                      std::optional<std::size_t> chunk_rows) {
        const Indices ids = indices_from_numpy(tokens, "loss");
        const Indices tg = indices_from_numpy(targets, "loss");
        py::gil_scoped_release release;
        return PyTensor(model.loss(ids, tg, ignore, chunk_rows));
      }, py::arg("tokens"), py::arg("targets"), py::arg("ignore_index") = -100,
      py::arg("chunk_rows") = py::none(),
      "mean cross-entropy of the next tokens; chunk_rows: the head and the loss computed that "
      "many rows at a time (no (B*T, vocab) logits at once), 0 all at once, None (default) "
      "chunked for a vocabulary of 8192 or more when a chunk holds fewer rows than the batch")
      .def("training_loss", [](Model& model, const py::object& tokens, const py::object& targets,
                               std::int64_t ignore, std::optional<std::size_t> chunk_rows) {
        const Indices ids = indices_from_numpy(tokens, "training_loss");
        const Indices tg = indices_from_numpy(targets, "training_loss");
        TrainingLoss<T> t;
        {
          py::gil_scoped_release release;
          t = model.training_loss(ids, tg, ignore, chunk_rows);
        }
        py::dict out;
        out["total"] = PyTensor(t.total);
        out["lm"] = PyTensor(t.lm);
        out["aux"] = PyTensor(t.aux);
        out["z"] = PyTensor(t.z);
        return out;
      }, py::arg("tokens"), py::arg("targets"), py::arg("ignore_index") = -100,
      py::arg("chunk_rows") = py::none(),
      "{'total', 'lm', 'aux', 'z'}: aux and z are the raw mean load-balancing loss and mean "
      "router z-loss over the MoE layers, total = lm + moe_aux_coef x aux + moe_z_coef x z "
      "(what training minimises; its forward alone applies moe_capacity; loss() is the LM "
      "loss alone)")
      .def("expert_load", [](Model& model) {
        py::list out;
        for (std::size_t l = 0; l < model.blocks().size(); ++l) {
          const MixtureOfExperts<T>* moe = model.blocks()[l].moe();
          if (!moe || moe->routing().fraction.empty()) continue;
          const Routing& r = moe->routing();
          py::dict d;
          d["layer"] = l;
          d["tokens"] = r.tokens;
          d["fraction"] = r.fraction;
          d["capacity"] = r.capacity;
          d["dropped_fraction"] = r.dropped_fraction();
          out.append(d);
        }
        return out;
      }, "each MoE layer's routing in the last forward: the fraction of tokens with each "
      "expert among their k choices (k/E each at perfect balance), the capacity (0: "
      "dropless) and the fraction of choices dropped")
      .def("parameters", [](const Model& model) {
        std::vector<PyTensor> out;
        for (const auto& p : model.named_parameters()) out.emplace_back(p.tensor);
        return out;
      })
      .def("named_parameters", [](const Model& model) {
        std::vector<std::pair<std::string, PyTensor>> out;
        for (const auto& p : model.named_parameters()) out.emplace_back(p.name, PyTensor(p.tensor));
        return out;
      })
      .def("parameter_count", &Model::parameter_count)
      .def("zero_grad", &Model::zero_grad)
      .def_property_readonly("config", &Model::config)
      .def_property("checkpoint_activations",
                    [](const Model& model) { return model.config().checkpoint_activations; },
                    [](Model& model, bool on) {
                      TransformerConfig c = model.config();
                      c.checkpoint_activations = on;
                      model.set_execution(c);
                    },
                    "keep only each block's input through a training forward and run the block "
                    "again in the backward (the config field, settable on a built or loaded model)")
      .def_property_readonly("dtype", [](const Model&) { return dtype_name<T>(); })
      .def("set_attention_path", [](Model& model, const std::string& path) {
        model.set_attention_path(attention_path_of("set_attention_path", path));
      }, py::arg("path"))
      .def("save", [](const Model& model, const std::string& path, const py::object& task) {
        std::vector<NpzEntry> extra = config_entries(model.config());
        for (NpzEntry& e : task_entries(task, model.config().vocab, model.config().context))
          extra.push_back(std::move(e));
        py::gil_scoped_release release;
        save_parameters(path, model, extra);
      }, py::arg("path"), py::arg("task") = py::none(),
      "The weights and configuration; task (a tasks.SequenceTask or its name) records what "
      "the model was trained on, as the trainer does, so that generate takes a task prompt")
      .def("load", [](Model& model, const std::string& path, bool allow_nonfinite) {
        py::gil_scoped_release release;
        if (!allow_nonfinite) refuse_nonfinite_parameters(path);
        load_checkpoint(path, model);
      }, py::arg("path"), py::arg("allow_nonfinite") = false,
      "Parameters from a checkpoint of the same architecture; NaN or Inf in one is a "
      "CheckpointError unless allow_nonfinite")
      .def("generate", [](Model& model, const std::vector<std::int64_t>& prompt, std::size_t max_new,
                          double temperature, std::size_t top_k, double top_p, Generator* gen,
                          std::uint64_t seed, bool use_cache, const std::string& at_context,
                          std::size_t prefill_chunk, const std::string& kv_dtype) {
        GenerateOptions o;
        o.prefill_chunk = prefill_chunk;
        o.kv_dtype = kv_dtype_from_name(kv_dtype);
        o.max_new_tokens = max_new;
        o.at_context = at_context_of(at_context);
        o.sampling = {temperature, top_k, top_p};
        o.use_cache = use_cache;
        warn_unused_generate_options(o);
        Generator own(seed);
        GenerateResult r;
        {
          py::gil_scoped_release release;
          r = generate(model, prompt, o, gen ? *gen : own);
        }
        if (r.stopped_at_context) warn_stopped_at_context(r, max_new, model.config().context);
        return r.tokens;
      }, py::arg("prompt"), py::arg("max_new_tokens"), py::arg("temperature") = 1.0,
      py::arg("top_k") = 0, py::arg("top_p") = 1.0, py::arg("generator") = nullptr,
      py::arg("seed") = 0, py::arg("use_cache") = true, py::arg("at_context") = "stop",
      py::arg("prefill_chunk") = 0, py::arg("kv_dtype") = "f32",
      "The new tokens after prompt (temperature 0: greedy; kv_dtype bf16: the KV cache in "
      "bfloat16, float32 models). Releases the GIL.");
  m.def((std::string("load_checkpoint_") + dtype_name<T>()).c_str(),
        [](const std::string& path, bool allow_nonfinite) {
          py::gil_scoped_release release;
          if (!allow_nonfinite) refuse_nonfinite_parameters(path);
          return load_checkpoint<T>(path);
        }, py::arg("path"), py::arg("allow_nonfinite") = false);
}

// The bytes of the state an optimiser keeps for params; MemoryError when they do not fit.
double require_state_memory(const char* op, const std::vector<PyTensor>& params,
                            std::size_t state_per_parameter) {
  if (params.empty() || state_per_parameter == 0) return 0;
  std::size_t count = 0;
  for (const PyTensor& p : params) count += std::visit([](const auto& x) { return x.size(); }, p.v);
  const double item = params[0].is_double() ? 8 : 4;
  const char* state = state_per_parameter == 2 ? "moments" : "momentum";
  const double bytes = double(count) * item * double(state_per_parameter);
  require_memory(op, fmt::format("{} for {} parameters need", state, count), bytes,
                 fmt::format("in {} ({} per parameter)", params[0].dtype(), state_per_parameter));
  return bytes;
}

// One Python optimiser over float32 or float64 parameters.
template <template <class> class Opt, class Options>
struct Optimizer {
  std::variant<Opt<float>, Opt<double>> opt;
  double state_bytes = 0;
  // state_per_parameter: the buffers the optimiser keeps per parameter value (AdamW's two
  // moments, SGD's momentum).
  static Optimizer make(const char* op, const std::vector<PyTensor>& params, const Options& o,
                        std::size_t state_per_parameter) {
    const double bytes = require_state_memory(op, params, state_per_parameter);
    if (!params.empty() && params[0].is_double())
      return Optimizer{Opt<double>(tensors_of<double>(op, params), o), bytes};
    return Optimizer{Opt<float>(tensors_of<float>(op, params), o), bytes};
  }
  void step() { std::visit([](auto& x) { x.step(); }, opt); }
  void zero_grad() { std::visit([](auto& x) { x.zero_grad(); }, opt); }
  double lr() const { return std::visit([](const auto& x) { return x.lr(); }, opt); }
  void set_lr(double lr) { std::visit([&](auto& x) { x.set_lr(lr); }, opt); }
};

template <template <class> class Opt, class Options>
double held_bytes(const Optimizer<Opt, Options>& o) {
  return o.state_bytes;
}

template <class O>
void bind_optimizer_methods(py::class_<O, TrimmingHolder<O>>& c) {
  c.def("step", [](O& o) {
     py::gil_scoped_release release;
     o.step();
   })
      .def("zero_grad", &O::zero_grad)
      .def_property("lr", &O::lr, &O::set_lr);
}

void bind_optimizers(py::module_& m) {
  using PyAdamW = Optimizer<AdamW, AdamWOptions>;
  py::class_<PyAdamW, TrimmingHolder<PyAdamW>> adamw(m, "AdamW", "torch.optim.AdamW's update (decoupled weight decay)");
  adamw.def(py::init([](const std::vector<PyTensor>& params, double lr, std::pair<double, double> betas,
                        double eps, double weight_decay) {
    return PyAdamW::make("AdamW", params, {lr, betas.first, betas.second, eps, weight_decay}, 2);
  }), py::arg("params"), py::arg("lr") = 1e-3, py::arg("betas") = std::make_pair(0.9, 0.999),
  py::arg("eps") = 1e-8, py::arg("weight_decay") = 1e-2);
  bind_optimizer_methods(adamw);
  using PySGD = Optimizer<SGD, SGDOptions>;
  py::class_<PySGD, TrimmingHolder<PySGD>> sgd(m, "SGD", "torch.optim.SGD's update");
  sgd.def(py::init([](const std::vector<PyTensor>& params, double lr, double momentum, double wd) {
    return PySGD::make("SGD", params, {lr, momentum, wd}, momentum != 0 ? 1 : 0);
  }), py::arg("params"), py::arg("lr") = 1e-2, py::arg("momentum") = 0.0, py::arg("weight_decay") = 0.0);
  bind_optimizer_methods(sgd);
  m.def("clip_grad_norm", [](const std::vector<PyTensor>& params, double max_norm) {
    if (!params.empty() && params[0].is_double())
      return clip_grad_norm(tensors_of<double>("clip_grad_norm", params), max_norm);
    return clip_grad_norm(tensors_of<float>("clip_grad_norm", params), max_norm);
  }, py::arg("params"), py::arg("max_norm"), "Scales the gradients to a global norm of at most max_norm; returns the norm before");
  py::class_<WarmupCosine>(m, "WarmupCosine", "linear warm-up, then cosine decay to min_lr")
      .def(py::init<double, double, std::size_t, std::size_t>(), py::arg("lr"), py::arg("min_lr"),
           py::arg("warmup_steps"), py::arg("total_steps"))
      .def("__call__", &WarmupCosine::operator(), py::arg("step"));
}

}  // namespace

void bind_nn(py::module_& m) {
  bind_config(m);
  bind_transformer<float>(m, "Transformer_float32");
  bind_transformer<double>(m, "Transformer_float64");
  bind_optimizers(m);
  m.def("read_checkpoint_config", &read_checkpoint_config, py::arg("path"));
  m.def("past_context_ok", &past_context_ok, py::arg("config"));
}

}  // namespace tapegrad::python
