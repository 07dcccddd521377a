/* DeepSeek V2/V3/V3.1/V3.2's tensor table (tensors_deepseek.c), walked by tensors.h. */
#ifndef MLA_MODEL_TENSORS_DEEPSEEK_H
#define MLA_MODEL_TENSORS_DEEPSEEK_H

#include "model/tensors.h"

extern const struct tensor_table tensors_deepseek;

#endif
