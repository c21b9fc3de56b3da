// SPDX-License-Identifier: BSD-3-Clause
// gradcodec._core: the public API (<gradcodec/gradcodec.hpp>) for the Python package, which
// wraps it (gradcodec/_api.py, docs/python.md). Encoding and decoding run with the GIL released.
// gradcodec::Error becomes the gradcodec.Error subclass of its code (gradcodec/_errors.py).
#include "arrays.hpp"
#include "bytes_sink.hpp"

#include <gradcodec/gradcodec.hpp>

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace gradcodec;
using gradcodec::python::HeldFrame;
using gradcodec::python::hold_frame;
using gradcodec::python::to_python;

namespace {

const char* error_class(ErrorCode c) {
  switch (c) {
    case ErrorCode::Usage: return "UsageError";
    case ErrorCode::Input: return "InputError";
    case ErrorCode::Corrupt: return "CorruptError";
    case ErrorCode::Mismatch: return "MismatchError";
    case ErrorCode::Internal: break;
  }
  return "InternalError";
}

// How the library's refusals of NaN/Inf end for Python callers: the keyword that stores such
// tensors raw.
constexpr const char* kPythonNonfiniteAdvice = "nonfinite=\"raw\" stores such tensors raw";

NonFinite nonfinite_of(const std::string& s) {
  if (s == "refuse") return NonFinite::Refuse;
  if (s == "raw") return NonFinite::Raw;
  throw Error(ErrorCode::Usage, "nonfinite must be 'refuse' or 'raw', not '" + s + "'");
}

py::dict summary_dict(const TensorSummary& s) {
  py::dict d;
  d["name"] = s.info.name;
  d["storage"] = s.storage;
  d["input_bytes"] = s.input_bytes;
  d["record_bytes"] = s.record_bytes;
  return d;
}

py::dict summary_dict(const EncodeSummary& s) {
  py::dict d;
  d["frames"] = s.frames;
  d["tensors"] = s.tensors;
  d["input_bytes"] = s.input_bytes;
  d["output_bytes"] = s.output_bytes;
  d["float_elements"] = s.float_elements;
  d["ratio"] = s.ratio();
  d["bits_per_parameter"] = s.bits_per_parameter();
  return d;
}

// An Encoder writing to a path (temporary name, renamed by finish) or into memory.
class PyEncoder {
 public:
  PyEncoder(const std::optional<std::string>& path, const std::string& preset, const std::string& pipeline,
            uint64_t seed, unsigned threads, uint32_t keyframe_interval, const std::string& nonfinite,
            bool overwrite, const std::string& inputs_json) {
    EncoderOptions o;
    o.preset = preset;
    o.pipeline = pipeline;
    o.seed = seed;
    o.threads = threads;
    o.keyframe_interval = keyframe_interval;
    o.nonfinite = nonfinite_of(nonfinite);
    o.nonfinite_advice = kPythonNonfiniteAdvice;
    o.overwrite = overwrite;
    o.inputs_json = inputs_json;
    if (path) {
      encoder_.emplace(Encoder::to_path(*path, o));
    } else {
      sink_ = std::make_unique<python::BytesSink>();
      encoder_.emplace(Encoder::to_sink(*sink_, o));
    }
  }

  py::list add(const py::sequence& items, const std::string& source) {
    Encoder& e = live();
    HeldFrame held = hold_frame(items);
    std::vector<TensorSummary> done;
    {
      py::gil_scoped_release unlocked;
      done = e.add_frame(held.views, source);
    }
    py::list out;
    for (const auto& s : done) out.append(summary_dict(s));
    return out;
  }

  py::dict finish() {
    Encoder& e = live();
    EncodeSummary s;
    {
      py::gil_scoped_release unlocked;
      s = e.finish();
    }
    finished_ = true;
    return summary_dict(s);
  }

  // Drops an unfinished container (no file left behind).
  void abort() {
    encoder_.reset();
    sink_.reset();
  }

  // The container's bytes once finished (None for a path): taken from the sink without a copy
  // the first time, the same object after.
  py::object bytes() {
    if (!finished_ || !sink_) return py::none();
    if (value_.is_none()) value_ = sink_->take();  // the sink stays (the Encoder refers to it), empty
    return value_;
  }

  std::string pipeline_text() const { return encoder_ ? encoder_->pipeline_text() : std::string(); }

 private:
  Encoder& live() {
    if (!encoder_ || finished_) throw Error(ErrorCode::Usage, "this Encoder is finished or closed");
    return *encoder_;
  }
  std::unique_ptr<python::BytesSink> sink_;
  py::object value_ = py::none();
  std::optional<Encoder> encoder_;
  bool finished_ = false;
};

Decoder open_decoder(const py::object& source, unsigned threads) {
  DecoderOptions o;
  o.threads = threads;
  if (py::isinstance<py::bytes>(source) || py::isinstance<py::bytearray>(source) ||
      py::isinstance<py::memoryview>(source)) {
    const py::buffer_info b = py::buffer(source).request();
    const auto* p = static_cast<const uint8_t*>(b.ptr);
    std::vector<uint8_t> bytes(p, p + b.size * b.itemsize);
    py::gil_scoped_release unlocked;
    return Decoder::from_bytes(std::move(bytes), o);
  }
  const auto path = py::str(source).cast<std::string>();
  py::gil_scoped_release unlocked;
  return Decoder::open(path, o);
}

void check_frame(const Decoder& d, size_t f) {
  if (f >= d.frame_count())
    throw py::index_error("frame " + std::to_string(f) + " of a container of " + std::to_string(d.frame_count()));
}

py::tuple info_tuple(const TensorInfo& t) {
  py::tuple shape(t.shape.size());
  for (size_t d = 0; d < t.shape.size(); ++d) shape[d] = t.shape[d];
  return py::make_tuple(t.name, gradcodec::python::kind_name(t.dtype), t.descr, shape);
}

// Compressor: one tensor at a time through a pipeline, per-name state kept (docs/python.md).
py::tuple compressor_roundtrip(Compressor& c, const std::string& name, const py::tuple& item) {
  py::list items;
  items.append(item);
  HeldFrame held = hold_frame(items);
  std::optional<Tensor> out;
  {
    py::gil_scoped_release unlocked;
    out.emplace(c.roundtrip(name, held.views.at(0)));
  }
  return to_python(*out);
}

// Compressor::encode: the record's bytes and what a receiver decodes from them.
py::tuple compressor_encode(Compressor& c, const std::string& name, const py::tuple& item) {
  py::list items;
  items.append(item);
  HeldFrame held = hold_frame(items);
  std::vector<uint8_t> record;
  Tensor decoded;
  {
    py::gil_scoped_release unlocked;
    record = c.encode(name, held.views.at(0), &decoded);
  }
  return py::make_tuple(py::bytes(reinterpret_cast<const char*>(record.data()), record.size()), to_python(decoded));
}

py::tuple decompressor_decode(Decompressor& d, const std::string& name, const py::buffer& record) {
  const py::buffer_info b = record.request();
  const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(b.ptr), static_cast<size_t>(b.size * b.itemsize));
  std::optional<Tensor> out;
  {
    py::gil_scoped_release unlocked;
    out.emplace(d.decode(name, bytes));
  }
  return to_python(*out);
}

CompressorOptions compressor_options(const std::string& preset, const std::string& pipeline, uint64_t seed,
                                     const std::string& nonfinite) {
  CompressorOptions o;
  o.preset = preset;
  o.pipeline = pipeline;
  o.seed = seed;
  o.nonfinite = nonfinite_of(nonfinite);
  o.nonfinite_advice = kPythonNonfiniteAdvice;
  return o;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "gradcodec's C++ library (the public API); use the package gradcodec.";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      const py::object cls = py::module_::import("gradcodec._errors").attr(error_class(e.code()));
      const py::tuple args = py::make_tuple(e.what(), static_cast<int>(e.code()));
      PyErr_SetObject(cls.ptr(), args.ptr());
    }
  });

  m.def("version", &gradcodec::version);
  m.def("canonical_pipeline", [](const std::string& preset, const std::string& pipeline) {
    EncoderOptions o;
    o.preset = preset;
    o.pipeline = pipeline;
    return canonical_pipeline(o);
  });

  py::class_<PyEncoder>(m, "Encoder")
      .def(py::init<const std::optional<std::string>&, const std::string&, const std::string&, uint64_t, unsigned,
                    uint32_t, const std::string&, bool, const std::string&>(),
           py::arg("path"), py::arg("preset"), py::arg("pipeline"), py::arg("seed"), py::arg("threads"),
           py::arg("keyframe_interval"), py::arg("nonfinite"), py::arg("overwrite"), py::arg("inputs_json"))
      .def("add", &PyEncoder::add, py::arg("items"), py::arg("source"))
      .def("finish", &PyEncoder::finish)
      .def("abort", &PyEncoder::abort)
      .def("bytes", &PyEncoder::bytes)
      .def("pipeline_text", &PyEncoder::pipeline_text);

  py::class_<Decoder>(m, "Decoder")
      .def(py::init(&open_decoder), py::arg("source"), py::arg("threads"))
      .def("pipeline_text", &Decoder::pipeline_text)
      .def("seed", &Decoder::seed)
      .def("keyframe_interval", &Decoder::keyframe_interval)
      .def("tool", &Decoder::tool)
      .def("inputs_json", &Decoder::inputs_json)
      .def("file_size", &Decoder::file_size)
      .def("frame_count", &Decoder::frame_count)
      .def("stateful", &Decoder::stateful)
      .def("frame",
           [](const Decoder& d, size_t f) {
             check_frame(d, f);
             const FrameEntry e = d.frame(f);
             return py::make_tuple(e.index, e.keyframe, e.source);
           })
      .def("tensors",
           [](const Decoder& d, size_t f) {
             check_frame(d, f);
             py::list out;
             for (const auto& t : d.tensors(f)) out.append(info_tuple(t));
             return out;
           })
      .def("find",
           [](const Decoder& d, size_t f, const std::string& name) {
             check_frame(d, f);
             return d.find(f, name);
           })
      .def("decode",
           [](Decoder& d, size_t f, size_t i) {
             check_frame(d, f);
             if (i >= d.tensors(f).size()) throw py::index_error("tensor index out of range");
             std::optional<Tensor> t;
             {
               py::gil_scoped_release unlocked;
               t.emplace(d.decode(f, i));
             }
             return to_python(*t);
           })
      .def("decode_frame", [](Decoder& d, size_t f) {
        check_frame(d, f);
        std::vector<Tensor> tensors;
        {
          py::gil_scoped_release unlocked;
          d.decode_frame(f, [&](Tensor&& t) { tensors.push_back(std::move(t)); });
        }
        py::list out;
        for (const auto& t : tensors) out.append(py::make_tuple(t.info.name, to_python(t)));
        return out;
      });

  py::class_<Compressor>(m, "Compressor")
      .def(py::init([](const std::string& preset, const std::string& pipeline, uint64_t seed,
                       const std::string& nonfinite) {
             return Compressor(compressor_options(preset, pipeline, seed, nonfinite));
           }),
           py::arg("preset"), py::arg("pipeline"), py::arg("seed"), py::arg("nonfinite"))
      .def("roundtrip", &compressor_roundtrip, py::arg("name"), py::arg("item"))
      .def("encode", &compressor_encode, py::arg("name"), py::arg("item"))
      .def("last_bytes", &Compressor::last_bytes)
      .def("calls", &Compressor::calls)
      .def("pipeline_text", &Compressor::pipeline_text)
      .def("stateful", &Compressor::stateful)
      .def("solo_frames", &Compressor::solo_frames);

  py::class_<Decompressor>(m, "Decompressor")
      .def(py::init([](const std::string& preset, const std::string& pipeline, uint64_t seed) {
             return Decompressor(compressor_options(preset, pipeline, seed, "refuse"));
           }),
           py::arg("preset"), py::arg("pipeline"), py::arg("seed"))
      .def("decode", &decompressor_decode, py::arg("name"), py::arg("record"))
      .def("calls", &Decompressor::calls)
      .def("reset", &Decompressor::reset)
      .def("pipeline_text", &Decompressor::pipeline_text);

  m.def(
      "inspect",
      [](const std::string& path, bool decode) {
        py::gil_scoped_release unlocked;
        return inspect(path, InspectOptions{.decode = decode});
      },
      py::arg("path"), py::arg("decode"));

  m.def(
      "bench",
      [](const py::sequence& frames, const std::vector<std::string>& presets, const std::vector<std::string>& pipelines,
         const std::vector<std::string>& sweeps, unsigned repeat, double min_time, unsigned seeds, unsigned threads,
         const std::string& nonfinite, bool per_tensor, double link_rate, unsigned link_workers, double link_latency,
         const std::string& collective, const std::string& target, const std::string& target_scope) {
        BenchOptions o;
        o.presets = presets;
        o.pipelines = pipelines;
        o.sweeps = sweeps;
        o.repeat = repeat;
        o.min_time = min_time;
        o.seeds = seeds;
        o.threads = threads;
        o.nonfinite = nonfinite_of(nonfinite);
        o.nonfinite_advice = kPythonNonfiniteAdvice;
        o.per_tensor = per_tensor;
        o.link_rate = link_rate;
        o.link_workers = link_workers;
        o.link_latency = link_latency;
        o.collective = collective;
        o.target = target;
        o.target_scope = target_scope;
        bench_plan(o);  // bad options refused before the arrays are taken
        std::vector<HeldFrame> held;
        std::vector<std::vector<TensorView>> views;
        for (const auto& items : frames) {
          held.push_back(hold_frame(items.cast<py::sequence>()));
          views.push_back(held.back().views);
        }
        py::gil_scoped_release unlocked;
        return bench(views, o);
      },
      py::arg("frames"), py::arg("presets"), py::arg("pipelines"), py::arg("sweeps"), py::arg("repeat"),
      py::arg("min_time"), py::arg("seeds"), py::arg("threads"), py::arg("nonfinite"), py::arg("per_tensor"),
      py::arg("link_rate"), py::arg("link_workers"), py::arg("link_latency"), py::arg("collective"),
      py::arg("target"), py::arg("target_scope"));

  m.def(
      "merge",
      [](const std::vector<std::string>& inputs, const std::string& output, const std::string& method, uint64_t seed,
         std::optional<double> eta, const std::string& preset, const std::string& pipeline, bool compensation,
         uint32_t full_sync, unsigned threads, bool overwrite, const std::string& inputs_json) {
        MergeSettings s;
        s.method = method;
        s.seed = seed;
        s.eta = eta;
        s.preset = preset;
        s.pipeline = pipeline;
        s.compensation = compensation;
        s.full_sync = full_sync;
        s.threads = threads;
        s.overwrite = overwrite;
        s.inputs_json = inputs_json;
        s.nonfinite_advice = "merge stores no tensor raw; method=\"mean\", preset=\"lossless\" keeps such values";
        MergeSummary r;
        {
          py::gil_scoped_release unlocked;
          r = merge(inputs, output, s);
        }
        py::dict d;
        d["frames"] = r.frames;
        d["tensors"] = r.tensors;
        d["pipeline"] = r.pipeline_text;
        d["hop_bits"] = r.hop_bits;
        d["bytes_written"] = r.bytes_written;
        return d;
      },
      py::arg("inputs"), py::arg("output"), py::arg("method"), py::arg("seed"), py::arg("eta"), py::arg("preset"),
      py::arg("pipeline"), py::arg("compensation"), py::arg("full_sync"), py::arg("threads"), py::arg("overwrite"),
      py::arg("inputs_json"));
}
