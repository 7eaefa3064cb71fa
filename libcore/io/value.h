// io::Value: the one tree every foreign-file reader returns (JSON, Marian's
// YAML, safetensors, npz, torch.save pickles), generic and knowing nothing of
// models. A value is null, a bool, an int (int64), a float (double), a
// string (UTF-8), bytes, a list, a tuple, a dict (ordered, any keys), an
// array (a tensor: element type, shape, little-endian C-order bytes) or an
// object (a Python object no reader interprets: its class and what its
// pickle gave, so that an argparse.Namespace can be navigated like a dict).
//
// Every value knows where it came from: the file (its origin) and its path
// inside it ("model.encoder[3]"). The accessors check the kind and throw one
// Error naming both: "config.json: 'd_model' must be an integer, got a
// string". Copies share their contents (a pickle refers to one list from
// two places); the mutable_ accessors are for readers building a tree.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tfm::io {

enum class ElementType : uint8_t { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean };

size_t element_size(ElementType t);
std::string_view element_name(ElementType t);  // "f32", ..., "bool"
bool is_float(ElementType t);                  // f64, f32, f16, bf16

// A tensor: numel() * element_size(type) bytes, little-endian, C order (the
// last dimension varies fastest). A rank-0 array holds one element.
struct Array {
  ElementType type = ElementType::f32;
  std::vector<int64_t> shape;
  std::string data;

  int64_t numel() const;
  // The elements as floats (f16 and bf16 exactly, f64 rounded) or doubles
  // (exact for every float type); an integer or bool array is an Error.
  std::vector<float> to_f32() const;
  std::vector<double> to_f64() const;
  // The elements of an integer or bool array; a float array is an Error.
  std::vector<int64_t> to_i64() const;
  // The bytes of an i8 or u8 array as text (Marian keeps its model.yml in
  // an npz entry so); any other element type is an Error.
  std::string_view text() const;
};

struct NamedArray {
  std::string name;
  Array array;
};

struct Object;

class Value {
 public:
  enum class Kind : uint8_t { null, boolean, integer, real, string, bytes, list, tuple, dict, array, object };
  using List = std::vector<Value>;
  using Dict = std::vector<std::pair<Value, Value>>;  // in insertion order

  Value() = default;  // null
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value real(double d);
  static Value string(std::string s);
  static Value bytes(std::string b);
  static Value list(List items = {});
  static Value tuple(List items = {});
  static Value dict(Dict items = {});
  static Value array(Array a);
  static Value object(Object o);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::null; }
  bool is(Kind k) const { return kind_ == k; }
  // "a string", "an integer", ...: for messages.
  std::string_view kind_name() const;

  bool as_bool() const;
  int64_t as_int() const;
  double as_float() const;  // a float, or an integer converted
  const std::string& as_string() const;
  const std::string& as_bytes() const;
  const List& items() const;  // a list or a tuple
  const Dict& as_dict() const;
  const Array& as_array() const;
  const Object& as_object() const;

  // The member named `key` of a dict (string keys), or the attribute of an
  // object (its state's dict): nullptr when there is none, an Error when
  // this value is neither a dict nor an object.
  const Value* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // As find, but a missing key is an Error naming it.
  const Value& operator[](std::string_view key) const;
  const Value& operator[](const char* key) const { return (*this)[std::string_view(key)]; }
  // The element `i` of a list or tuple, checked.
  const Value& at(size_t i) const;
  size_t size() const;  // of a list, tuple or dict

  const std::string& origin() const;  // the file, as the reader named it
  const std::string& path() const { return path_; }  // "" at the top
  // "config.json: 'encoder.layers'" (or "config.json: the top-level value"):
  // how a message names this value.
  std::string where() const;

  // For readers. The mutable accessors check the kind as the others do.
  List& mutable_items();
  Dict& mutable_dict();
  Object& mutable_object();
  // Names this value `origin` at the top and every value under it by its
  // path. A value that contains itself (a pickle can say so) is an Error,
  // as is nesting deeper than 512 levels. Contents shared by two places
  // are named by the first.
  void name_tree(const std::string& origin);
  // Names this value alone (name_tree's step).
  void set_name(std::shared_ptr<const std::string> origin, std::string path);

 private:
  using Data = std::variant<std::monostate, bool, int64_t, double, std::shared_ptr<std::string>,
                            std::shared_ptr<List>, std::shared_ptr<Dict>, std::shared_ptr<Array>,
                            std::shared_ptr<Object>>;
  Value(Kind kind, Data data) : kind_(kind), data_(std::move(data)) {}
  [[noreturn]] void wrong_kind(std::string_view wanted) const;

  Kind kind_ = Kind::null;
  Data data_;
  std::shared_ptr<const std::string> origin_;
  std::string path_;
};

// A Python object that no reader interprets, as its pickle built it:
// `cls(*args, **kwargs)`, then `state` given to it (BUILD: usually its
// __dict__, or a tuple (dict, slots)), and the items a list or dict subclass
// was given (APPENDS / SETITEMS). Nothing of it was ever executed. With
// `global` set it is the class or function itself (a pickled reference
// such as torch.float32), not an instance.
struct Object {
  std::string class_name;  // "module.Name", e.g. "argparse.Namespace"
  bool global = false;
  Value args = Value::tuple();
  Value kwargs;  // a dict, or null
  Value state;   // null when the pickle gave none
  Value::List list_items;
  Value::Dict dict_items;
};

// A string key's value in `dict` (a Dict of a Value), or nullptr.
const Value* find_key(const Value::Dict& dict, std::string_view key);

}  // namespace tfm::io
