// SPDX-License-Identifier: BSD-3-Clause
// target_pipeline (gradcodec.hpp, docs/target.md): a searched stage named without its parameter
// gets the grid's finest value; anything else is left exactly as written.
#include <gradcodec/gradcodec.hpp>
#include <gradcodec/pipeline.hpp>

#include <catch2/catch.hpp>

using namespace gradcodec;

TEST_CASE("target_pipeline fills the first searched stage's parameter, and nothing else", "[api][target]") {
  CHECK(target_pipeline("topk") == "topk(ratio=1)");
  CHECK(target_pipeline("topk()") == "topk(ratio=1)");
  CHECK(target_pipeline("topk(scope=global)") == "topk(scope=global, ratio=1)");
  CHECK(target_pipeline("ef | topk | raw") == "ef | topk(ratio=1) | raw");
  CHECK(target_pipeline("qsgd") == "qsgd(levels=65535)");
  CHECK(target_pipeline("zfp") == "zfp(rate=32)");                                 // mode=rate by default
  CHECK(target_pipeline("zfp(mode=accuracy)") == "zfp(mode=accuracy, tolerance=1e-12)");
  // Given already (or its alternative): as written.
  for (const char* text : {"topk(ratio=0.5)", "topk(k=10)", "qsgd(levels=3)", "fp16", "sign | zstd",
                           "zfp(mode=precision)", "zfp(mode=precision) | topk(ratio=0.1)"})
    CHECK(target_pipeline(text) == text);
  // Only the first searched stage; a stage inside a quoted parameter is not a top-level one.
  CHECK(target_pipeline("topk | qsgd") == "topk(ratio=1) | qsgd");
  CHECK(target_pipeline("accordion(mild=\"topk\", aggressive=\"topk\")") == "accordion(mild=\"topk\", aggressive=\"topk\")");
  // zfp(mode=precision) declares no searched parameter that applies: the next stage's is filled.
  CHECK(target_pipeline("zfp(mode=precision, precision=8) | topk") == "zfp(mode=precision, precision=8) | topk(ratio=1)");
  // The filled text parses; a searched stage reaches the search.
  CHECK_NOTHROW(Pipeline::parse(target_pipeline("ef | topk | raw")));
}
