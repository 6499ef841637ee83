"""tapegrad from Python: a tape-based autograd engine in C++, float32 and float64.

    import numpy as np, tapegrad as tg
    x = tg.tensor(np.random.randn(2, 6, 16), requires_grad=True)   # float64 kept
    out, weights = tg.scaled_dot_product_attention(x, x, x, mask=tg.causal_mask(6))
    tg.sum(out * out).backward()
    x.grad                                                         # a NumPy array

Every op of the C++ API is here under its C++ name. Errors keep tapegrad's message:
ShapeError (a ValueError) for bad shapes or arguments, GraphError for a freed or edited
graph, AnomalyError under detect_anomaly(), CheckpointError (ValueError) and NpzError
(OSError) for checkpoints. See docs/PYTHON.md.
"""
from . import _tapegrad
from ._tapegrad import *  # noqa: F401,F403  (Tensor, the ops, no_grad, gradcheck, ...)
from ._tapegrad import (AnomalyError, CheckpointError, GraphError, NpzError, ShapeError,
                        Tensor, Generator)
import importlib as _importlib
from . import _numpy_protocols

_numpy_protocols.install(Tensor)

# The star import bound `nn` and `tasks` to the compiled submodules; the package's own
# nn.py and tasks.py (which build on them) take those names instead.
nn = _importlib.import_module(".nn", __name__)
tasks = _importlib.import_module(".tasks", __name__)

__all__ = [name for name in dir(_tapegrad) if not name.startswith("_")] + ["nn", "tasks"]
