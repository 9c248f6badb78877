// tsr_dtype_name: the one table of dtype names the CLI, Python and PyTorch print, against the names
// written out here (DLPack's codes from dlpack.h, Tessera's bool and string codes from tessera.h).
#include <gtest/gtest.h>

#include <string>

#include "tessera/tessera.h"

namespace {

std::string name_of(uint8_t code, uint8_t bits, uint16_t lanes = 1) {
  const char* name = tsr_dtype_name(DLDataType{code, bits, lanes});
  return name ? name : "(null)";
}

TEST(CapiDtypeName, NamesEveryDtypeTesseraHasAndNothingElse) {
  EXPECT_EQ(name_of(kDLFloat, 32), "float32");
  EXPECT_EQ(name_of(kDLFloat, 16), "float16");
  EXPECT_EQ(name_of(kDLFloat, 64), "float64");
  EXPECT_EQ(name_of(kDLBfloat, 16), "bfloat16");
  EXPECT_EQ(name_of(kDLInt, 8), "int8");
  EXPECT_EQ(name_of(kDLInt, 64), "int64");
  EXPECT_EQ(name_of(kDLUInt, 8), "uint8");
  EXPECT_EQ(name_of(kDLUInt, 32), "uint32");
  EXPECT_EQ(name_of(TSR_DL_BOOL_CODE, 8), "bool");
  EXPECT_EQ(name_of(TSR_DL_STRING_CODE, 8), "str");
  // No tensors of these: no name (callers say "unknown" or describe the code).
  EXPECT_EQ(name_of(kDLFloat, 8), "(null)");
  EXPECT_EQ(name_of(kDLInt, 4), "(null)");
  EXPECT_EQ(name_of(kDLFloat, 32, 4), "(null)");
  EXPECT_EQ(name_of(kDLBfloat, 32), "(null)");
  EXPECT_EQ(name_of(200, 8), "(null)");
}

}  // namespace
