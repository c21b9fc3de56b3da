// SPDX-License-Identifier: BSD-3-Clause
// inspect(): the record `gradcodec inspect --json` prints (gradcodec.hpp, docs/api.md). It reads
// the header, footer and record metadata, verifies every stream's checksum, and decodes every
// record (as decode would, nothing kept) to count the values each one sends: the kept fraction
// and BIRD+ Fig. 10's index / value / overall compression ratios, as bench reports them.
// Records whose stages store figures in their streams (Stage::stream_stats: bloom, curvefit)
// also have those read.
#include <gradcodec/gradcodec.hpp>

#include "api/open.hpp"

#include <gradcodec/codec.hpp>
#include <gradcodec/container_error.hpp>
#include <gradcodec/detail/json_capped.hpp>

#include <nlohmann/json.hpp>

#include <map>

namespace gradcodec {

namespace {

using nlohmann::ordered_json;

// The dtype as numpy names it: `dtype.str` ("<f4", ">f8", "|b1") and `dtype.name` ("float32").
// numpy has no bfloat16: its name is ml_dtypes' "bfloat16" and it has no descr (null); decoding
// to NPY writes it as float32. A descr numpy names only by a longer rule (strings, structured,
// datetimes) has a null name.
nlohmann::ordered_json numpy_descr(const TensorInfo& info) {
  const char order = info.big_endian ? '>' : '<';
  switch (info.dtype) {
    case DType::F16: return std::string(1, order) + "f2";
    case DType::F32: return std::string(1, order) + "f4";
    case DType::F64: return std::string(1, order) + "f8";
    case DType::BF16: return nullptr;
    case DType::Other: break;
  }
  return info.descr.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(info.descr);
}

nlohmann::ordered_json numpy_name(const TensorInfo& info) {
  switch (info.dtype) {
    case DType::F16: return "float16";
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::BF16: return "bfloat16";
    case DType::Other: break;
  }
  const std::string& d = info.descr;  // "<i8": byte order, kind, size in bytes
  if (d.size() < 3 || std::string("<>|=").find(d[0]) == std::string::npos) return nullptr;
  const std::string size = d.substr(2);
  if (size.find_first_not_of("0123456789") != std::string::npos || size.size() > 2) return nullptr;
  const int bytes = std::stoi(size);
  switch (d[1]) {
    case 'b': return bytes == 1 ? nlohmann::ordered_json("bool") : nlohmann::ordered_json(nullptr);
    case 'i': return "int" + std::to_string(8 * bytes);
    case 'u': return "uint" + std::to_string(8 * bytes);
    case 'f': return "float" + std::to_string(8 * bytes);
    case 'c': return "complex" + std::to_string(8 * bytes);
    default: return nullptr;
  }
}

// The part of the bit breakdown a stream belongs to.
const char* stream_class(const std::string& name) {
  if (name == kIndexStream) return "index";
  if (name == kValueStream || name == "raw") return "value";
  if (name == kScaleStream) return "scale";
  return "side";
}

// A header value the reader kept as JSON text (checked and depth-capped when the header was read).
ordered_json header_value(const std::string& text) {
  auto parsed = parse_json_capped<ordered_json>(text);
  if (!parsed.error.empty()) fail(ErrorCode::Internal, "header value read back: " + parsed.error);
  return std::move(parsed.value);
}

std::string short_stages(const std::string& pipeline_json) {
  return Pipeline::from_json(pipeline_json).text();
}

// v / params, or null for params == 0 (a snapshot of empty or pass-through arrays only).
ordered_json per_param(double v, uint64_t params) {
  if (params == 0) return nullptr;
  return v / double(params);
}

}  // namespace

std::string inspect(const std::string& path, const InspectOptions& options) {
  ContainerReader r(api::open_container_file(path));
  const ContainerHeader& h = r.header();
  ordered_json out;
  out["file"] = path;
  out["tool"] = h.tool;
  out["pipeline"] = h.pipeline_text;
  out["pipeline_json"] = header_value(h.pipeline_json);
  out["seed"] = h.seed;
  out["keyframe_interval"] = h.keyframe_interval;
  out["inputs"] = header_value(h.inputs_json);
  if (!h.target_json.empty()) out["target"] = header_value(h.target_json);
  std::map<uint32_t, std::string> variant_text;
  std::map<uint32_t, std::unique_ptr<PipelineStages>> variant_stages;  // for the stages' figures
  StageStats all_stats;
  uint64_t total_in = 0, total_params = 0, total_tensors = 0, total_streams = 0;
  std::map<std::string, uint64_t> classes = {{"index", 0}, {"value", 0}, {"scale", 0}, {"side", 0}};
  const bool decode = options.decode;
  SequenceDecoder decoder(r);
  // Why a tensor is stored raw: a lossless pipeline stores raw only what its encoding would
  // grow; a lossy one also what --nonfinite=raw kept (NaN/Inf, or values a stage cannot
  // represent). The container does not say which.
  const char* raw_label = PipelineStages(Pipeline::from_json(h.pipeline_json)).lossless()
                              ? "raw (encoding would grow it)"
                              : "raw (encoding would grow it, or --nonfinite=raw)";
  uint64_t total_kept = 0;
  ordered_json frames = ordered_json::array();
  for (size_t f = 0; f < r.frame_count(); ++f) {
    ordered_json fr;
    fr["frame"] = f;
    fr["keyframe"] = r.frame(f).keyframe;
    fr["source"] = r.frame(f).source;
    ordered_json tensors = ordered_json::array();
    uint64_t f_in = 0, f_bytes = 0, f_params = 0;
    for (size_t i = 0; i < r.record_count(f); ++i) {
      RecordMeta m = r.record(f, i);
      r.verify_streams(m);  // inspect vouches for what it lists
      const uint64_t elements = m.info.elements();
      const bool fl = is_float(m.info.dtype);
      const uint64_t in_bytes = fl ? elements * dtype_size(m.info.dtype) : m.stream_bytes();
      ordered_json t;
      t["name"] = m.info.name;
      t["shape"] = m.info.shape;
      t["dtype"] = fl ? dtype_name(m.info.dtype) : m.info.descr;
      t["numpy_dtype"] = numpy_name(m.info);
      t["numpy_descr"] = numpy_descr(m.info);
      t["storage"] = storage_name(m.storage);
      if (m.storage == Storage::Pipeline) {
        if (!variant_text.count(m.variant)) variant_text[m.variant] = short_stages(r.variants()[m.variant]);
        t["stages"] = variant_text[m.variant];
        auto& ps = variant_stages[m.variant];
        if (!ps) ps = std::make_unique<PipelineStages>(Pipeline::from_json(r.variants()[m.variant]));
        if (ps->has_stats()) {  // figures the stages stored in their streams (bloom, curvefit)
          StageStats st;
          try {
            st = ps->stats(m.info, r.streams(m), true);
          } catch (...) {
            rethrow_located(r, f, i, m);
          }
          ordered_json sj = ordered_json::object();
          for (const auto& x : st) sj[x.name] = x.value();
          t["stage_stats"] = sj;
          merge_stats(all_stats, st);
        }
      } else {
        t["stages"] = m.storage == Storage::Raw ? raw_label : "pass-through";
      }
      t["input_bytes"] = in_bytes;
      t["bytes"] = m.size;
      if (decode) {
        decoder.decode(f, i);  // the values are dropped: only their count is wanted
        t["kept"] = decoder.kept();
        total_kept += decoder.kept();
      }
      ordered_json streams = ordered_json::object();
      for (const auto& s : m.streams) {
        streams[s.name] = s.size;
        classes[stream_class(s.name)] += s.size;
        total_streams += s.size;
      }
      t["streams"] = streams;
      t["ratio"] = m.size ? double(in_bytes) / double(m.size) : 0.0;
      t["bits_per_param"] = per_param(8.0 * double(m.size), fl ? elements : 0);
      tensors.push_back(t);
      f_in += in_bytes;
      f_bytes += m.size;
      if (fl) f_params += elements;
      ++total_tensors;
    }
    fr["tensors"] = tensors;
    fr["input_bytes"] = f_in;
    fr["record_bytes"] = f_bytes;
    fr["parameters"] = f_params;
    total_in += f_in;
    total_params += f_params;
    frames.push_back(fr);
  }
  out["frames"] = frames;
  const uint64_t file = r.file_size();
  ordered_json totals;
  totals["frames"] = r.frame_count();
  totals["tensors"] = total_tensors;
  totals["parameters"] = total_params;
  totals["input_bytes"] = total_in;
  totals["container_bytes"] = file;
  totals["ratio"] = file ? double(total_in) / double(file) : 0.0;
  totals["bits_per_param"] = per_param(8.0 * double(file), total_params);
  ordered_json br;
  for (const auto& [k, v] : classes) br[k] = per_param(8.0 * double(v), total_params);
  br["overhead"] = per_param(8.0 * double(file - total_streams), total_params);
  totals["bits_per_param_breakdown"] = br;
  if (decode) {  // the formulas of bench (docs/bench.md); null when the part is absent
    auto cr = [](double dense_bits, uint64_t bytes) -> ordered_json {
      if (bytes == 0) return nullptr;
      return dense_bits / (8.0 * double(bytes));
    };
    const double kept = double(total_kept);
    totals["kept"] = total_kept;
    totals["kept_fraction"] = per_param(kept, total_params);
    totals["index_cr"] = cr(32.0 * kept, classes["index"]);
    totals["value_cr"] = cr(32.0 * kept, classes["value"] + classes["scale"]);
    totals["overall_cr"] = cr(64.0 * kept, total_streams);
  }
  ordered_json figs = ordered_json::object();
  for (const auto& x : all_stats)
    figs[x.name] = {{"value", x.value()}, {"num", x.num}, {"den", x.den}, {"formula", x.formula}};
  totals["stage_stats"] = figs;
  out["totals"] = totals;

  return out.dump(2);
}

}  // namespace gradcodec
