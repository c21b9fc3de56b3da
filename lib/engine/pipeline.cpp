// SPDX-License-Identifier: BSD-3-Clause
// Pipeline grammar, canonical forms and typed-chain validation (see pipeline.hpp).
#include <gradcodec/pipeline.hpp>

#include <gradcodec/detail/json_capped.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

namespace gradcodec {

using nlohmann::ordered_json;

std::string format_number(double v, ParamType t) {
  if (t == ParamType::Int) return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

namespace {

[[noreturn]] void usage(const std::string& m) { fail(ErrorCode::Usage, m); }

std::string names_of_kind(StageKind k) {
  std::string s;
  for (const auto& e : stage_table())
    if (e.kind == k) s += (s.empty() ? "" : ", ") + std::string(e.name);
  return s.empty() ? "(none yet)" : s;
}

std::string param_list(const StageEntry& e) {
  if (e.params.empty()) return std::string(e.name) + " takes no parameters";
  std::string s = std::string(e.name) + " takes ";
  for (size_t i = 0; i < e.params.size(); ++i) s += (i ? ", " : "") + e.params[i].name;
  return s;
}

std::string range_text(const ParamSpec& p) {
  std::string lo = p.min <= -1e299 ? "-inf" : format_number(p.min, p.type);
  std::string hi = p.max >= 1e299 ? "inf" : format_number(p.max, p.type);
  return std::string(p.min_exclusive ? "(" : "[") + lo + ", " + hi + "]";
}

// Validates a value of a parameter (raw text as written by the user, `quoted` when in quotes).
ParamValue make_value(const StageEntry& e, const ParamSpec& p, const std::string& raw, bool quoted) {
  ParamValue v;
  v.type = p.type;
  const std::string where = std::string(e.name) + ": " + p.name + "=" + raw;
  switch (p.type) {
    case ParamType::Int:
    case ParamType::Float: {
      if (quoted) usage(where + " must be a number");
      std::string s = raw;
      bool percent = !s.empty() && s.back() == '%';
      if (percent) s.pop_back();
      double d = 0;
      auto r = std::from_chars(s.data(), s.data() + s.size(), d);
      if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || !std::isfinite(d))
        usage(where + " is not a number");
      if (percent) d /= 100.0;
      if (p.type == ParamType::Int && d != std::floor(d)) usage(where + " must be an integer");
      bool low = p.min_exclusive ? d <= p.min : d < p.min;
      if (low || d > p.max) usage(where + " is out of range " + range_text(p));
      v.num = d;
      v.text = format_number(d, p.type);
      return v;
    }
    case ParamType::Bool:
      if (raw == "true" || raw == "1") v.text = "true", v.num = 1;
      else if (raw == "false" || raw == "0") v.text = "false", v.num = 0;
      else usage(where + " must be true or false");
      return v;
    case ParamType::Choice: {
      if (std::find(p.choices.begin(), p.choices.end(), raw) == p.choices.end()) {
        std::string c;
        for (const auto& x : p.choices) c += (c.empty() ? "" : "|") + x;
        usage(where + " is not one of " + c);
      }
      v.text = raw;
      return v;
    }
    case ParamType::Pipeline: {
      const Pipeline nested = Pipeline::parse(raw);  // nested pipelines are validated too
      v.text = nested.text();
      for (const StageSpec& n : nested.stages()) {
        const StageEntry* ne = find_stage(n.name);
        v.stages.push_back({n.name, ne->kind, [ne, n] { return ne->make(n.params, n.version); }});
      }
      return v;
    }
  }
  usage(where + ": bad parameter");
}

// ---- tokenizer ----
struct Lexer {
  const std::string& s;
  size_t i = 0;
  void skip() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    skip();
    if (i < s.size() && s[i] == c) return ++i, true;
    return false;
  }
  bool at_end() {
    skip();
    return i >= s.size();
  }
  std::string ident() {
    skip();
    size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' ||
                            s[i] == '-' || s[i] == '+'))
      ++i;
    return s.substr(b, i - b);
  }
  // A value: quoted string, or run of characters up to ',' or ')'.
  std::string value(bool& quoted) {
    skip();
    quoted = false;
    if (i < s.size() && s[i] == '"') {
      quoted = true;
      std::string out;
      ++i;
      while (i < s.size() && s[i] != '"') {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        out += s[i++];
      }
      if (i >= s.size()) usage("pipeline: unterminated string in \"" + s + "\"");
      ++i;
      return out;
    }
    size_t b = i;
    while (i < s.size() && s[i] != ',' && s[i] != ')' && s[i] != '|') ++i;
    std::string out = s.substr(b, i - b);
    while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
    return out;
  }
};

StageSpec make_spec(const StageEntry& e, uint32_t version, std::map<std::string, ParamValue> given) {
  StageSpec spec;
  spec.name = e.name;
  spec.version = version;
  for (const auto& p : e.params) {
    auto it = given.find(p.name);
    if (it != given.end()) {
      spec.params.set(p.name, it->second);
    } else if (!p.default_text.empty()) {
      spec.params.set(p.name, make_value(e, p, p.default_text, false));
    } else if (p.required) {
      usage(std::string(e.name) + ": missing parameter '" + p.name + "' (" + p.help + ")");
    }
  }
  return spec;
}

const StageEntry& entry_or_usage(const std::string& name) {
  const StageEntry* e = find_stage(name);
  if (!e) {
    std::string all;
    for (const auto& x : stage_table()) all += (all.empty() ? "" : ", ") + std::string(x.name);
    std::string hint;
    if (find_preset(name)) hint = " ('" + name + "' is a preset: use --preset " + name + ")";
    usage("unknown stage '" + name + "'" + hint + "; stages: " + all);
  }
  return *e;
}

int kind_rank(StageKind k) {
  switch (k) {
    case StageKind::Transform: return 0;
    case StageKind::Sparsifier:
    case StageKind::LowRank: return 1;
    case StageKind::Quantizer: return 2;
    case StageKind::IndexCoder: return 3;
    case StageKind::Lossless: return 4;
  }
  return 5;
}

const char* kind_plural(StageKind k) {
  switch (k) {
    case StageKind::Transform: return "transforms";
    case StageKind::Sparsifier: return "sparsifiers";
    case StageKind::LowRank: return "low-rank stages";
    case StageKind::Quantizer: return "quantizers";
    case StageKind::IndexCoder: return "index coders";
    case StageKind::Lossless: return "lossless stages";
  }
  return "stages";
}

}  // namespace

// A value codec that reorders the index into value order (curvefit) needs coded positions (a
// sparsifier that sends its index) and an index coder that keeps that order.
template <class Bad>
void check_value_order(const std::vector<StageSpec>& specs, const StageSpec* reducer, const Stage* reducer_stage,
                       const Bad& bad) {
  const StageSpec* quant = nullptr;
  const StageSpec* coder = nullptr;
  for (const auto& s : specs) {
    StageKind k = find_stage(s.name)->kind;
    if (k == StageKind::Quantizer) quant = &s;
    if (k == StageKind::IndexCoder) coder = &s;
  }
  if (!quant) return;
  auto q = find_stage(quant->name)->make(quant->params, quant->version);
  if (!static_cast<const Quantizer*>(q.get())->reorders_index()) return;
  auto* red = dynamic_cast<const Reducer*>(reducer_stage);
  if (!reducer || !red || red->kind() != StageKind::Sparsifier || !red->needs_index_coder() || !coder)
    bad(quant->name + " sends the kept values in value order with their positions: it needs a sparsifier whose "
        "positions are coded before it (sparsifiers: " + names_of_kind(StageKind::Sparsifier) + ")");
  auto c = find_stage(coder->name)->make(coder->params, coder->version);
  if (!static_cast<const IndexCoder*>(c.get())->keeps_order()) {
    std::string keep;
    for (const auto& e : stage_table()) {
      if (e.kind != StageKind::IndexCoder) continue;
      auto x = e.make(make_spec(e, e.version, {}).params, e.version);
      if (static_cast<const IndexCoder*>(x.get())->keeps_order()) keep += (keep.empty() ? "" : ", ") + std::string(e.name);
    }
    bad(quant->name + " reorders the positions into value order, which " + coder->name +
        " cannot code (index coders that keep value order: " + keep + ")");
  }
}

// Checks the typed chain and inserts the implied stages; shared by parse() and from_json().
struct PipelineBuilder {
  static Pipeline finish(std::vector<StageSpec> specs, bool from_container) {
    auto bad = [&](const std::string& m) {
      fail(from_container ? ErrorCode::Corrupt : ErrorCode::Usage, "pipeline: " + m);
    };
    if (specs.empty()) bad("empty pipeline (stages: " + names_of_kind(StageKind::Quantizer) + ", ...)");
    int last_rank = -1;
    const StageSpec* reducer = nullptr;
    const StageSpec* quantizer = nullptr;
    const StageSpec* indexer = nullptr;
    std::unique_ptr<Stage> reducer_stage;
    for (const auto& s : specs) {
      const StageEntry* e = find_stage(s.name);
      int r = kind_rank(e->kind);
      if (r < last_rank) {
        bad(s.name + " (" + stage_kind_name(e->kind) +
            ") is out of order: stages go transform* [sparsifier | lowrank] [quantizer] "
            "[index coder] lossless*");
      }
      if (r == last_rank && r >= 1 && r <= 3) {
        const StageSpec* prev = r == 1 ? reducer : r == 2 ? quantizer : indexer;
        bad(std::string("two ") + kind_plural(e->kind) + ": " + prev->name + " and " + s.name +
            " (a pipeline has at most one)");
      }
      last_rank = r;
      if (r == 1) reducer = &s, reducer_stage = e->make(s.params, s.version);
      if (r == 2) quantizer = &s;
      if (r == 3) {
        indexer = &s;
        // The stage's own kind: a control stage (accordion) takes the kind of the stage it wraps.
        if (!reducer || reducer_stage->kind() != StageKind::Sparsifier)
          bad(s.name + " (index coder) needs a sparsifier before it (sparsifiers: " +
              names_of_kind(StageKind::Sparsifier) + ")");
        auto* red = dynamic_cast<Reducer*>(reducer_stage.get());
        if (red && !red->needs_index_coder())
          bad(s.name + " (index coder) follows " + reducer->name +
              ", whose positions cost nothing (the decoder regenerates them); drop " + s.name);
      }
    }
    // Implied stages, inserted where they belong.
    std::vector<StageSpec> out = specs;
    auto insert_before_rank = [&](int rank, StageSpec spec) {
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const StageSpec& s) { return kind_rank(find_stage(s.name)->kind) >= rank; });
      out.insert(it, std::move(spec));
    };
    if (!quantizer) insert_before_rank(2, make_spec(*find_stage("raw"), 1, {}));
    if (reducer && !indexer) {
      auto* red = dynamic_cast<Reducer*>(reducer_stage.get());
      bool is_sparsifier = reducer_stage->kind() == StageKind::Sparsifier;
      if (is_sparsifier && red && red->needs_index_coder())
        insert_before_rank(3, make_spec(*find_stage("varint"), find_stage("varint")->version, {}));
    }
    // Every stage must instantiate (factories reject combinations the schema cannot express).
    for (const auto& s : out) (void)find_stage(s.name)->make(s.params, s.version);
    check_value_order(out, reducer, reducer_stage.get(), bad);
    Pipeline p;
    p.stages_ = std::move(out);
    return p;
  }
};

Pipeline Pipeline::parse(const std::string& text) {
  Lexer lx{text};
  std::vector<StageSpec> specs;
  if (lx.at_end()) usage("pipeline: empty pipeline text");
  do {
    std::string name = lx.ident();
    if (name.empty()) usage("pipeline: expected a stage name at offset " + std::to_string(lx.i) + " in \"" + text + "\"");
    const StageEntry& e = entry_or_usage(name);
    std::map<std::string, ParamValue> given;
    if (lx.eat('(')) {
      if (!lx.eat(')')) {
        do {
          const size_t at = lx.i;
          std::string key = lx.ident();
          const ParamSpec* ps = nullptr;
          for (const auto& p : e.params)
            if (p.name == key) ps = &p;
          if (!ps) {
            // A value without its name ("topk(0.01)"): show the NAME=VALUE form with the
            // stage's first parameter.
            Lexer ahead{text, lx.i};
            if (!ahead.eat('=')) {
              lx.i = at;
              bool quoted = false;
              std::string raw = lx.value(quoted);
              if (quoted) raw = "\"" + raw + "\"";
              if (raw.empty()) usage(name + ": an empty parameter (a stray ',') (" + param_list(e) + ")");
              if (e.params.empty()) usage(name + " takes no parameters (got '" + raw + "')");
              // The example names the first parameter that takes this value ("zfp(4)": rate, not
              // mode), else the first parameter.
              const ParamSpec* example = &e.params.front();
              for (const auto& p : e.params) {
                try {
                  make_value(e, p, raw, quoted);
                } catch (const Error&) {
                  continue;
                }
                example = &p;
                break;
              }
              usage(name + ": parameters are given as NAME=VALUE, e.g. " + name + "(" + example->name + "=" + raw +
                    ") (" + param_list(e) + ")");
            }
          }
          if (!ps) usage(name + ": unknown parameter '" + key + "' (" + param_list(e) + ")");
          if (!lx.eat('=')) usage(name + ": expected '=' after '" + key + "'");
          bool quoted = false;
          std::string raw = lx.value(quoted);
          if (raw.empty() && !quoted) usage(name + ": " + key + "= needs a value");
          if (given.count(key)) usage(name + ": parameter '" + key + "' given twice");
          given[key] = make_value(e, *ps, raw, quoted);
        } while (lx.eat(','));
        if (!lx.eat(')')) usage(name + ": expected ',' or ')' at offset " + std::to_string(lx.i) + " in \"" + text + "\"");
      }
    }
    specs.push_back(make_spec(e, e.version, std::move(given)));
  } while (lx.eat('|'));
  if (!lx.at_end()) usage("pipeline: unexpected '" + text.substr(lx.i, 10) + "' at offset " + std::to_string(lx.i) + " (stages are separated by '|')");
  return PipelineBuilder::finish(std::move(specs), false);
}

Pipeline Pipeline::from_stages(std::vector<StageSpec> stages) { return PipelineBuilder::finish(std::move(stages), false); }

Pipeline Pipeline::preset(const std::string& name) {
  const Preset* p = find_preset(name);
  if (!p) {
    std::string all;
    for (const auto& x : preset_table()) all += (all.empty() ? "" : ", ") + std::string(x.name);
    usage("unknown preset '" + name + "'; presets: " + all);
  }
  return parse(p->pipeline);
}

namespace {

ordered_json to_json_value(const Pipeline& p);

ordered_json param_json(const ParamValue& v) {
  switch (v.type) {
    case ParamType::Int: return static_cast<int64_t>(v.num);
    case ParamType::Float: return v.num;
    case ParamType::Bool: return v.text == "true";
    case ParamType::Choice: return v.text;
    case ParamType::Pipeline: return to_json_value(Pipeline::parse(v.text));
  }
  return nullptr;
}

ordered_json to_json_value(const Pipeline& p) {
  ordered_json stages = ordered_json::array();
  for (const auto& s : p.stages()) {
    ordered_json st;
    st["stage"] = s.name;
    st["version"] = s.version;
    ordered_json params = ordered_json::object();
    for (const auto& ps : find_stage(s.name)->params)
      if (s.params.has(ps.name)) params[ps.name] = param_json(s.params.values().at(ps.name));
    st["params"] = params;
    stages.push_back(st);
  }
  return stages;
}

Pipeline from_json_value(const nlohmann::json& j);

[[noreturn]] void corrupt(const std::string& m) { fail(ErrorCode::Corrupt, "pipeline JSON: " + m); }

Pipeline from_json_value(const nlohmann::json& j) {
  if (!j.is_array() || j.empty()) corrupt("expected a non-empty array of stages");
  std::vector<StageSpec> specs;
  for (const auto& st : j) {
    if (!st.is_object() || !st.contains("stage") || !st["stage"].is_string() ||
        !st.contains("version") || !st["version"].is_number_unsigned() || !st.contains("params") ||
        !st["params"].is_object())
      corrupt("malformed stage entry");
    std::string name = st["stage"].get<std::string>();
    const StageEntry* e = find_stage(name);
    if (!e) corrupt("unknown stage '" + name + "' (written by a newer gradcodec?)");
    uint64_t ver = st["version"].get<uint64_t>();
    bool known = ver == e->version ||
                 std::find(e->decodable_versions.begin(), e->decodable_versions.end(), ver) != e->decodable_versions.end();
    if (!known)
      corrupt("unknown version " + std::to_string(ver) + " of stage '" + name + "' (this gradcodec decodes version " +
              std::to_string(e->version) + ")");
    std::map<std::string, ParamValue> given;
    for (auto it = st["params"].begin(); it != st["params"].end(); ++it) {
      const ParamSpec* ps = nullptr;
      for (const auto& p : e->params)
        if (p.name == it.key()) ps = &p;
      if (!ps) corrupt(name + ": unknown parameter '" + it.key() + "'");
      const auto& v = it.value();
      std::string raw;
      bool quoted = false;
      switch (ps->type) {
        case ParamType::Int:
        case ParamType::Float:
          if (!v.is_number()) corrupt(name + "." + ps->name + " must be a number");
          raw = format_number(v.get<double>(), ParamType::Float);
          break;
        case ParamType::Bool:
          if (!v.is_boolean()) corrupt(name + "." + ps->name + " must be a boolean");
          raw = v.get<bool>() ? "true" : "false";
          break;
        case ParamType::Choice:
          if (!v.is_string()) corrupt(name + "." + ps->name + " must be a string");
          raw = v.get<std::string>();
          break;
        case ParamType::Pipeline:
          raw = from_json_value(v).text();
          quoted = true;
          break;
      }
      try {
        given[ps->name] = make_value(*e, *ps, raw, quoted);
      } catch (const Error& err) {
        corrupt(err.what());
      }
    }
    try {
      specs.push_back(make_spec(*e, static_cast<uint32_t>(ver), std::move(given)));
    } catch (const Error& err) {
      corrupt(err.what());
    }
  }
  return PipelineBuilder::finish(std::move(specs), true);
}

}  // namespace

std::string Pipeline::json() const { return to_json_value(*this).dump(); }

Pipeline Pipeline::from_json(const std::string& text) {
  const auto parsed = parse_json_capped<nlohmann::json>(text);
  if (!parsed.error.empty()) corrupt(parsed.error);
  return from_json_value(parsed.value);
}

std::string Pipeline::text() const {
  std::string out;
  for (size_t i = 0; i < stages_.size(); ++i) {
    const auto& s = stages_[i];
    if (i) out += " | ";
    out += s.name;
    std::string args;
    for (const auto& ps : find_stage(s.name)->params) {
      if (!s.params.has(ps.name)) continue;
      const ParamValue& v = s.params.values().at(ps.name);
      if (!ps.default_text.empty() && v.text == make_value(*find_stage(s.name), ps, ps.default_text, false).text)
        continue;  // canonical text leaves defaults out; the JSON names every parameter
      std::string val = v.type == ParamType::Pipeline ? "\"" + v.text + "\"" : v.text;
      args += (args.empty() ? "" : ", ") + ps.name + "=" + val;
    }
    if (!args.empty()) out += "(" + args + ")";
  }
  return out;
}

bool Pipeline::has_stage(const std::string& name) const {
  for (const auto& s : stages_)
    if (s.name == name) return true;
  return false;
}

Pipeline Pipeline::with_param(const std::string& stage, const std::string& param, const std::string& value) const {
  std::vector<StageSpec> specs = stages_;
  bool found = false;
  for (auto& s : specs) {
    if (s.name != stage) continue;
    const StageEntry& e = *find_stage(s.name);
    const ParamSpec* ps = nullptr;
    for (const auto& p : e.params)
      if (p.name == param) ps = &p;
    if (!ps) usage(stage + ": unknown parameter '" + param + "' (" + param_list(e) + ")");
    bool quoted = value.size() >= 2 && value.front() == '"' && value.back() == '"';
    s.params.set(param, make_value(e, *ps, quoted ? value.substr(1, value.size() - 2) : value, quoted));
    if (const char* other = alternative_param(stage, param)) s.params.erase(other);  // k replaces ratio, and back
    found = true;
  }
  if (!found) usage("pipeline '" + text() + "' has no stage '" + stage + "'");
  return PipelineBuilder::finish(std::move(specs), false);
}

bool Pipeline::operator==(const Pipeline& o) const {
  if (stages_.size() != o.stages_.size()) return false;
  for (size_t i = 0; i < stages_.size(); ++i)
    if (stages_[i].name != o.stages_[i].name || stages_[i].version != o.stages_[i].version ||
        !(stages_[i].params == o.stages_[i].params))
      return false;
  return true;
}

}  // namespace gradcodec
