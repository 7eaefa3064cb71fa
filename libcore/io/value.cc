#include "libcore/io/value.h"

#include <fmt/ranges.h>

#include <cstring>
#include <unordered_set>

#include "libcore/base/dtype.h"
#include "libcore/base/error.h"

namespace tfm::io {

size_t element_size(ElementType t) {
  switch (t) {
    case ElementType::f64: case ElementType::i64: return 8;
    case ElementType::f32: case ElementType::i32: return 4;
    case ElementType::f16: case ElementType::bf16: case ElementType::i16: return 2;
    case ElementType::i8: case ElementType::u8: case ElementType::boolean: return 1;
  }
  return 0;
}

std::string_view element_name(ElementType t) {
  switch (t) {
    case ElementType::f64: return "f64";
    case ElementType::f32: return "f32";
    case ElementType::f16: return "f16";
    case ElementType::bf16: return "bf16";
    case ElementType::i64: return "i64";
    case ElementType::i32: return "i32";
    case ElementType::i16: return "i16";
    case ElementType::i8: return "i8";
    case ElementType::u8: return "u8";
    case ElementType::boolean: return "bool";
  }
  return "?";
}

bool is_float(ElementType t) {
  return t == ElementType::f64 || t == ElementType::f32 || t == ElementType::f16 || t == ElementType::bf16;
}

int64_t Array::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

namespace {

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Element i of `a` as a double; the caller has checked the type is a float.
double float_at(const Array& a, size_t i) {
  const char* p = a.data.data() + i * element_size(a.type);
  switch (a.type) {
    case ElementType::f64: return load<double>(p);
    case ElementType::f32: return load<float>(p);
    case ElementType::f16: return static_cast<float>(f16{load<f16>(p)});
    case ElementType::bf16: return static_cast<float>(bf16{load<bf16>(p)});
    default: return 0;
  }
}

size_t checked_count(const Array& a) {
  const size_t n = static_cast<size_t>(a.numel());
  if (a.data.size() != n * element_size(a.type))
    fail("an array of shape {} ({}) holds {} bytes instead of {}", fmt::join(a.shape, "x"),
         element_name(a.type), a.data.size(), n * element_size(a.type));
  return n;
}

}  // namespace

std::vector<double> Array::to_f64() const {
  if (!is_float(type)) fail("a {} array cannot be read as floats", element_name(type));
  std::vector<double> out(checked_count(*this));
  for (size_t i = 0; i < out.size(); ++i) out[i] = float_at(*this, i);
  return out;
}

std::vector<float> Array::to_f32() const {
  if (!is_float(type)) fail("a {} array cannot be read as floats", element_name(type));
  std::vector<float> out(checked_count(*this));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(float_at(*this, i));
  return out;
}

std::vector<int64_t> Array::to_i64() const {
  if (is_float(type)) fail("a {} array cannot be read as integers", element_name(type));
  std::vector<int64_t> out(checked_count(*this));
  const char* p = data.data();
  for (size_t i = 0; i < out.size(); ++i) {
    switch (type) {
      case ElementType::i64: out[i] = load<int64_t>(p + 8 * i); break;
      case ElementType::i32: out[i] = load<int32_t>(p + 4 * i); break;
      case ElementType::i16: out[i] = load<int16_t>(p + 2 * i); break;
      case ElementType::i8: out[i] = load<int8_t>(p + i); break;
      case ElementType::u8: out[i] = load<uint8_t>(p + i); break;
      case ElementType::boolean: out[i] = load<uint8_t>(p + i) != 0; break;
      default: break;
    }
  }
  return out;
}

std::string_view Array::text() const {
  if (type != ElementType::i8 && type != ElementType::u8)
    fail("a {} array cannot be read as text (only i8 and u8 arrays can)", element_name(type));
  return data;
}

// ---- Value ----

Value Value::boolean(bool b) { return {Kind::boolean, b}; }
Value Value::integer(int64_t i) { return {Kind::integer, i}; }
Value Value::real(double d) { return {Kind::real, d}; }
Value Value::string(std::string s) { return {Kind::string, std::make_shared<std::string>(std::move(s))}; }
Value Value::bytes(std::string b) { return {Kind::bytes, std::make_shared<std::string>(std::move(b))}; }
Value Value::list(List items) { return {Kind::list, std::make_shared<List>(std::move(items))}; }
Value Value::tuple(List items) { return {Kind::tuple, std::make_shared<List>(std::move(items))}; }
Value Value::dict(Dict items) { return {Kind::dict, std::make_shared<Dict>(std::move(items))}; }
Value Value::array(Array a) { return {Kind::array, std::make_shared<Array>(std::move(a))}; }
Value Value::object(Object o) { return {Kind::object, std::make_shared<Object>(std::move(o))}; }

std::string_view Value::kind_name() const {
  switch (kind_) {
    case Kind::null: return "null";
    case Kind::boolean: return "a bool";
    case Kind::integer: return "an integer";
    case Kind::real: return "a float";
    case Kind::string: return "a string";
    case Kind::bytes: return "bytes";
    case Kind::list: return "a list";
    case Kind::tuple: return "a tuple";
    case Kind::dict: return "a dict";
    case Kind::array: return "an array";
    case Kind::object: return "an object";
  }
  return "?";
}

const std::string& Value::origin() const {
  static const std::string unnamed = "(value)";
  return origin_ ? *origin_ : unnamed;
}

std::string Value::where() const {
  if (path_.empty()) return origin() + ": the top-level value";
  return fmt::format("{}: '{}'", origin(), printable(path_));
}

void Value::wrong_kind(std::string_view wanted) const {
  fail("{} must be {}, got {}", where(), wanted, kind_name());
}

bool Value::as_bool() const {
  if (kind_ != Kind::boolean) wrong_kind("a bool");
  return std::get<bool>(data_);
}
int64_t Value::as_int() const {
  if (kind_ != Kind::integer) wrong_kind("an integer");
  return std::get<int64_t>(data_);
}
double Value::as_float() const {
  if (kind_ == Kind::integer) return static_cast<double>(std::get<int64_t>(data_));
  if (kind_ != Kind::real) wrong_kind("a number");
  return std::get<double>(data_);
}
const std::string& Value::as_string() const {
  if (kind_ != Kind::string) wrong_kind("a string");
  return *std::get<std::shared_ptr<std::string>>(data_);
}
const std::string& Value::as_bytes() const {
  if (kind_ != Kind::bytes) wrong_kind("bytes");
  return *std::get<std::shared_ptr<std::string>>(data_);
}
const Value::List& Value::items() const { return const_cast<Value*>(this)->mutable_items(); }
const Value::Dict& Value::as_dict() const { return const_cast<Value*>(this)->mutable_dict(); }
const Object& Value::as_object() const { return const_cast<Value*>(this)->mutable_object(); }
const Array& Value::as_array() const {
  if (kind_ != Kind::array) wrong_kind("an array");
  return *std::get<std::shared_ptr<Array>>(data_);
}

Value::List& Value::mutable_items() {
  if (kind_ != Kind::list && kind_ != Kind::tuple) wrong_kind("a list");
  return *std::get<std::shared_ptr<List>>(data_);
}
Value::Dict& Value::mutable_dict() {
  if (kind_ != Kind::dict) wrong_kind("a dict");
  return *std::get<std::shared_ptr<Dict>>(data_);
}
Object& Value::mutable_object() {
  if (kind_ != Kind::object) wrong_kind("an object");
  return *std::get<std::shared_ptr<Object>>(data_);
}

const Value* find_key(const Value::Dict& dict, std::string_view key) {
  for (const auto& [k, v] : dict)
    if (k.kind() == Value::Kind::string && k.as_string() == key) return &v;
  return nullptr;
}

const Value* Value::find(std::string_view key) const {
  if (kind_ == Kind::dict) return find_key(as_dict(), key);
  if (kind_ != Kind::object) wrong_kind("a dict");
  // An object's attributes: its state's dict, or the dicts of a
  // (dict, slots) state; then what a dict subclass was given.
  const Object& o = as_object();
  if (o.state.is(Kind::dict))
    if (const Value* v = find_key(o.state.as_dict(), key)) return v;
  if (o.state.is(Kind::tuple))
    for (const Value& part : o.state.items())
      if (part.is(Kind::dict))
        if (const Value* v = find_key(part.as_dict(), key)) return v;
  return find_key(o.dict_items, key);
}

const Value& Value::operator[](std::string_view key) const {
  if (const Value* v = find(key)) return *v;
  if (path_.empty()) fail("{}: no key '{}' at the top level", origin(), printable(key));
  fail("{} has no key '{}'", where(), printable(key));
}

const Value& Value::at(size_t i) const {
  const List& l = items();
  if (i >= l.size()) fail("{} has {} elements: there is no element {}", where(), l.size(), i);
  return l[i];
}

size_t Value::size() const {
  if (kind_ == Kind::dict) return as_dict().size();
  return items().size();
}

namespace {

// The path of a dict member or attribute: "a.b", or "a[3]" for a
// non-string key.
std::string member_path(const std::string& parent, const Value& key) {
  if (key.is(Value::Kind::string)) return parent.empty() ? key.as_string() : parent + "." + key.as_string();
  if (key.is(Value::Kind::integer)) return fmt::format("{}[{}]", parent, key.as_int());
  return fmt::format("{}[{}]", parent, key.kind_name());
}

const void* contents(Value& v) {
  switch (v.kind()) {
    case Value::Kind::list: case Value::Kind::tuple: return &v.mutable_items();
    case Value::Kind::dict: return &v.mutable_dict();
    case Value::Kind::object: return &v.mutable_object();
    default: return nullptr;
  }
}

struct Namer {
  std::shared_ptr<const std::string> origin;
  std::unordered_set<const void*> named, open;

  // Names `v` `path`, and what it holds. An object's state dict is named
  // `path.__state__` but its members `path.NAME`, as find() reaches them
  // (`members` is the path their names extend).
  void name(Value& v, const std::string& path, int depth, const std::string* members = nullptr) {
    if (depth > 512) fail("{}: '{}' nests deeper than 512 levels", *origin, printable(path));
    v.set_name(origin, path);
    const void* inside = contents(v);
    if (inside == nullptr) return;
    if (open.count(inside)) fail("{}: '{}' contains itself", *origin, printable(path));
    if (!named.insert(inside).second) return;
    open.insert(inside);
    if (v.is(Value::Kind::list) || v.is(Value::Kind::tuple)) {
      auto& items = v.mutable_items();
      for (size_t i = 0; i < items.size(); ++i) name(items[i], fmt::format("{}[{}]", path, i), depth + 1);
    } else if (v.is(Value::Kind::dict)) {
      name_dict(v.mutable_dict(), members ? *members : path, depth);
    } else {
      Object& o = v.mutable_object();
      name(o.args, path + ".__args__", depth + 1);
      name(o.kwargs, path + ".__kwargs__", depth + 1);
      name(o.state, path + ".__state__", depth + 1, &path);
      for (size_t i = 0; i < o.list_items.size(); ++i)
        name(o.list_items[i], fmt::format("{}[{}]", path, i), depth + 1);
      name_dict(o.dict_items, path, depth);
    }
    open.erase(inside);
  }

  void name_dict(Value::Dict& d, const std::string& path, int depth) {
    for (auto& [k, v] : d) {
      const std::string at = member_path(path, k);
      name(k, at, depth + 1);
      name(v, at, depth + 1);
    }
  }
};

}  // namespace

void Value::set_name(std::shared_ptr<const std::string> origin, std::string path) {
  origin_ = std::move(origin);
  path_ = std::move(path);
}

void Value::name_tree(const std::string& origin) {
  Namer namer{std::make_shared<const std::string>(origin), {}, {}};
  namer.name(*this, "", 0);
}

}  // namespace tfm::io
