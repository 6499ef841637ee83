// tapegrad's exceptions as Python exceptions, each keeping tapegrad's message:
//   ShapeError (bad shapes, axes, arguments)        -> tapegrad.ShapeError(ValueError)
//   GraphError (a freed or edited graph)            -> tapegrad.GraphError(RuntimeError)
//   AnomalyError (a NaN/Inf under anomaly mode)     -> tapegrad.AnomalyError(FloatingPointError)
//   CheckpointError (a file that does not fit)      -> tapegrad.CheckpointError(ValueError)
//   NpzError (not a readable .npz, cannot write)    -> tapegrad.NpzError(OSError)
//   OutOfMemory (would not fit), std::bad_alloc     -> MemoryError, with the memory available
//   IoError (platform/io_error.hpp: a file that     -> the OSError its errno names
//   cannot be opened, read or written: a tokenizer     (FileNotFoundError, PermissionError),
//   file, a text file, a Hugging Face folder's)        OSError where it holds no errno
//   std::system_error (a failed system call)        -> the OSError its errno names
// NpzError is an IoError in C++, but stays tapegrad.NpzError in Python (an OSError too).
#include <pybind11/pybind11.h>

#include <system_error>

#include "autograd/errors.hpp"
#include "platform/format_bytes.hpp"
#include "autograd/tape.hpp"
#include "bindings.hpp"
#include "memory_budget.hpp"
#include "nn/io/checkpoint_error.hpp"
#include "nn/io/npz_error.hpp"
#include "platform/io_error.hpp"

namespace tapegrad::python {

void bind_errors(py::module_& m) {
  // Each translator catches its own type (and subclasses); the standard exceptions the
  // library throws otherwise keep pybind11's mapping (invalid_argument -> ValueError,
  // runtime_error -> RuntimeError).
  py::register_exception<ShapeError>(m, "ShapeError", PyExc_ValueError);
  py::register_exception<GraphError>(m, "GraphError", PyExc_RuntimeError);
  py::register_exception<AnomalyError>(m, "AnomalyError", PyExc_FloatingPointError);
  py::register_exception<CheckpointError>(m, "CheckpointError", PyExc_ValueError);
  py::register_exception<NpzError>(m, "NpzError", PyExc_OSError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NpzError&) {
      throw;  // an IoError, but tapegrad.NpzError's own translator (above) maps it
    } catch (const OutOfMemory& e) {
      PyErr_SetString(PyExc_MemoryError, e.what());
    } catch (const std::system_error& e) {  // IoError among them
      // OSError(errno, text) is made as the subclass the errno names; without an errno, OSError(text)
      if (e.code().value() != 0)
        PyErr_SetObject(PyExc_OSError, py::make_tuple(e.code().value(), e.what()).ptr());
      else
        PyErr_SetString(PyExc_OSError, e.what());
    } catch (const std::bad_alloc&) {
      const MemoryBudget b = memory_budget();
      PyErr_SetString(PyExc_MemoryError,
                      ("out of memory: an allocation failed (std::bad_alloc) with " +
                       format_bytes(b.bytes) + " available (" + b.source + ")").c_str());
    }
  });
}

}  // namespace tapegrad::python
