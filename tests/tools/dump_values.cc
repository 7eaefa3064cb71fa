// Prints what tfm's foreign-file readers (libcore/io/) make of a file, as
// JSON, for tests/reference/foreign_readers.sh to compare with what Python
// holds:
//
//   dump_values safetensors|npz|torch|json|yaml FILE
//
// safetensors and npz files print as a dict of their arrays in file order
// (safetensors' __metadata__ first when there is one). The encoding keeps
// every kind apart, floats exact:
//   null, true/false, ints as JSON integers, strings as JSON strings
//   floats       a number with '.' or an exponent; {"float": "nan"|"inf"|"-inf"}
//   bytes        {"bytes": "hex"}
//   list         [...]               tuple  {"tuple": [...]}
//   dict         {"dict": [[key, value], ...]}
//   array        {"array": "f32", "shape": [...], "values": [...]} (C order;
//                floats as above, ints, bools as true/false)
//   object       {"object": "module.Name", "args": ..., "state": ...} (and
//                "kwargs", "list_items", "dict_items" when it has them);
//                a class or function itself {"global": "module.Name"}
// A file the reader refuses: one line on stderr, exit 1 (2 for bad usage).
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "libcore/base/error.h"
#include "libcore/base/json.h"
#include "libcore/io/json_read.h"
#include "libcore/io/npz.h"
#include "libcore/io/read_file.h"
#include "libcore/io/safetensors.h"
#include "libcore/io/torch_read.h"
#include "libcore/io/yaml_read.h"

using namespace tfm;
using io::Value;

namespace {

std::string number(double d) {
  if (std::isnan(d)) return R"({"float": "nan"})";
  if (std::isinf(d)) return d > 0 ? R"({"float": "inf"})" : R"({"float": "-inf"})";
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

void dump(const Value& v, std::string& out);

void dump_list(const Value::List& items, std::string& out) {
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    dump(items[i], out);
  }
  out += ']';
}

void dump_dict(const Value::Dict& d, std::string& out) {
  out += '[';
  for (size_t i = 0; i < d.size(); ++i) {
    out += i ? ", [" : "[";
    dump(d[i].first, out);
    out += ", ";
    dump(d[i].second, out);
    out += ']';
  }
  out += ']';
}

void dump_array(const io::Array& a, std::string& out) {
  out += fmt::format(R"({{"array": "{}", "shape": [{}], "values": [)", io::element_name(a.type), fmt::join(a.shape, ", "));
  if (io::is_float(a.type)) {
    const std::vector<double> values = a.to_f64();
    for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + number(values[i]);
  } else {
    const std::vector<int64_t> values = a.to_i64();
    for (size_t i = 0; i < values.size(); ++i) {
      if (i) out += ", ";
      out += a.type == io::ElementType::boolean ? (values[i] ? "true" : "false") : std::to_string(values[i]);
    }
  }
  out += "]}";
}

void dump(const Value& v, std::string& out) {
  switch (v.kind()) {
    case Value::Kind::null: out += "null"; return;
    case Value::Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::integer: out += std::to_string(v.as_int()); return;
    case Value::Kind::real: out += number(v.as_float()); return;
    case Value::Kind::string: out += json_quote(v.as_string()); return;
    case Value::Kind::bytes: {
      out += R"({"bytes": ")";
      for (const char c : v.as_bytes()) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
      out += "\"}";
      return;
    }
    case Value::Kind::list: dump_list(v.items(), out); return;
    case Value::Kind::tuple:
      out += R"({"tuple": )";
      dump_list(v.items(), out);
      out += '}';
      return;
    case Value::Kind::dict:
      out += R"({"dict": )";
      dump_dict(v.as_dict(), out);
      out += '}';
      return;
    case Value::Kind::array: dump_array(v.as_array(), out); return;
    case Value::Kind::object: {
      const io::Object& o = v.as_object();
      if (o.global) {
        out += R"({"global": )" + json_quote(o.class_name) + "}";
        return;
      }
      out += R"({"object": )" + json_quote(o.class_name) + R"(, "args": )";
      dump(o.args, out);
      out += R"(, "state": )";
      dump(o.state, out);
      if (!o.kwargs.is_null()) {
        out += R"(, "kwargs": )";
        dump(o.kwargs, out);
      }
      if (!o.list_items.empty()) {
        out += R"(, "list_items": )";
        dump_list(o.list_items, out);
      }
      if (!o.dict_items.empty()) {
        out += R"(, "dict_items": )";
        dump_dict(o.dict_items, out);
      }
      out += '}';
      return;
    }
  }
}

Value arrays(std::vector<io::NamedArray> named, Value metadata = {}) {
  Value::Dict d;
  if (!metadata.is_null()) d.emplace_back(Value::string("__metadata__"), std::move(metadata));
  for (io::NamedArray& a : named) d.emplace_back(Value::string(std::move(a.name)), Value::array(std::move(a.array)));
  return Value::dict(std::move(d));
}

Value read(const std::string& kind, const std::string& path) {
  if (kind == "safetensors") {
    io::Safetensors s = io::read_safetensors(path);
    return arrays(std::move(s.tensors), std::move(s.metadata));
  }
  if (kind == "npz") return arrays(io::read_npz(path));
  if (kind == "torch") return io::read_torch(path);
  if (kind == "json") return io::parse_json(io::read_file(path), path);
  if (kind == "yaml") return io::parse_yaml(io::read_file(path), path);
  throw UsageError(fmt::format("unknown kind '{}' (safetensors, npz, torch, json or yaml)", kind));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: dump_values safetensors|npz|torch|json|yaml FILE\n");
    return 2;
  }
  try {
    std::string out;
    dump(read(argv[1], argv[2]), out);
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "dump_values: error: %s\n", e.what());
    return 2;
  } catch (const Error& e) {
    if (e.where().empty()) std::fprintf(stderr, "dump_values: error: %s\n", e.what());
    else std::fprintf(stderr, "dump_values: error: %s (%s)\n", e.what(), e.where().c_str());
    return 1;
  }
}
