#pragma once
// The training tasks of train_tiny_transformer, generated in code from a seeded Generator,
// one family a file:
//   tasks/batch.hpp          what every task hands the trainer (Batch, kIgnore) and the
//                            held-out rule's hash;
//   tasks/sequence_task.hpp  sort, reverse and recall: input, SEP, answer, loss on the
//                            answer (recall's training options in recall_curriculum.cpp);
//   tasks/repeat_task.hpp    induction data: random tokens, then the same tokens again;
//   tasks/text_task.hpp      a language model of a UTF-8 file, in characters or BPE tokens
//                            (tasks/text_coder.hpp);
//   tasks/checkpoint_entries.hpp  what the trainer stores about its task in a checkpoint.
// Evaluation is tasks/evaluate.hpp.
#include "tasks/batch.hpp"
#include "tasks/checkpoint_entries.hpp"
#include "tasks/repeat_task.hpp"
#include "tasks/sequence_task.hpp"
#include "tasks/text_coder.hpp"
#include "tasks/text_task.hpp"
