#pragma once
// The checkpoint's schema as JSON, for readers outside C++ (tools/to_torch.py and
// tools/torch_model.py read tools/checkpoint_schema.json, which tools/checkpoint_schema
// prints and a test keeps equal to this build's): the format, the config prefix, the
// extra entries, and per field its name, kind, role, the format that first stored it, its
// default, its value in older files, its choices and its doc; and the training state's
// prefix, format and the entries that need interpreting (the precision).
#include <string>

namespace tapegrad {

std::string checkpoint_schema_json();

}  // namespace tapegrad
