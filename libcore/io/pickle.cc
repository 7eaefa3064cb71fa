#include "libcore/io/pickle.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "libcore/base/error.h"
#include "libcore/io/foreign_bytes.h"

namespace tfm::io {

namespace {

using Kind = Value::Kind;

// An int of `n` little-endian two's-complement bytes (LONG1, LONG4): an
// integer when it fits int64, else the nearest double (rounded once: the
// top 64 bits of the magnitude with a sticky bit for the rest).
Value long_value(std::string_view b) {
  const size_t n = b.size();
  if (n == 0) return Value::integer(0);
  const bool negative = static_cast<unsigned char>(b[n - 1]) & 0x80;
  std::string mag(b);
  if (negative) {  // the magnitude: invert and add one
    bool carry = true;
    for (char& c : mag) {
      c = static_cast<char>(~static_cast<unsigned char>(c));
      if (carry) carry = ++reinterpret_cast<unsigned char&>(c) == 0;
    }
  }
  size_t bits = n * 8;
  while (bits > 0 && !((static_cast<unsigned char>(mag[(bits - 1) / 8]) >> ((bits - 1) % 8)) & 1)) --bits;
  const auto bit = [&](size_t i) { return (static_cast<unsigned char>(mag[i / 8]) >> (i % 8)) & 1u; };
  if (bits <= 64) {
    uint64_t m = 0;
    for (size_t i = 0; i < bits; ++i) m |= uint64_t{bit(i)} << i;
    if (!negative && m <= uint64_t{INT64_MAX}) return Value::integer(static_cast<int64_t>(m));
    if (negative && m <= uint64_t{INT64_MAX} + 1) return Value::integer(static_cast<int64_t>(0 - m));
  }
  const size_t shift = bits > 64 ? bits - 64 : 0;
  uint64_t top = 0;
  for (size_t i = 0; i < 64 && shift + i < bits; ++i) top |= uint64_t{bit(shift + i)} << i;
  for (size_t i = 0; i < shift; ++i)
    if (bit(i)) {
      top |= 1;
      break;
    }
  const double d = std::ldexp(static_cast<double>(top), static_cast<int>(shift));
  return Value::real(negative ? -d : d);
}

bool named(const Value& v, std::initializer_list<std::string_view> names) {
  if (!v.is(Kind::object) || !v.as_object().global) return false;
  for (const std::string_view n : names)
    if (v.as_object().class_name == n) return true;
  return false;
}

class Unpickler {
 public:
  Unpickler(std::string_view bytes, const std::string& origin, const PickleHooks& hooks)
      : b_(bytes), origin_(origin), hooks_(hooks) {}

  Value run() {
    try {
      Value v = loop();
      v.name_tree(origin_);
      made_.clear();
      return v;
    } catch (...) {
      // Containers may refer to each other in a cycle (a malformed pickle
      // can make one): empty them all so that nothing leaks.
      for (Value& c : made_) {
        if (c.is(Kind::dict)) c.mutable_dict().clear();
        else if (c.is(Kind::object)) c.mutable_object() = Object{};
        else c.mutable_items().clear();
      }
      throw;
    }
  }

 private:
  [[noreturn]] void error(std::string_view what) const {
    fail("{}: {} (pickle offset {})", origin_, what, op_at_);
  }

  std::string_view take(uint64_t n) {
    if (n > b_.size() - pos_) error("the pickle is truncated");
    const std::string_view s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  uint64_t uint(size_t n) { return load_le(take(n).data(), n); }
  // A text argument: the bytes up to the next newline, which is skipped.
  std::string_view text_line() {
    const size_t nl = b_.find('\n', pos_);
    if (nl == std::string_view::npos) error("the pickle is truncated");
    const std::string_view s = b_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return s;
  }

  Value pop() {
    if (stack_.size() <= floor()) error("the pickle pops from an empty stack");
    Value v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Value& top() {
    if (stack_.size() <= floor()) error("the pickle reads an empty stack");
    return stack_.back();
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  // The values pushed since the last MARK, which is removed.
  Value::List pop_mark() {
    if (marks_.empty()) error("the pickle pops a mark that is not there");
    const size_t at = marks_.back();
    marks_.pop_back();
    Value::List items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(at)),
                      std::make_move_iterator(stack_.end()));
    stack_.resize(at);
    return items;
  }
  Value container(Value v) {
    made_.push_back(v);
    return v;
  }
  void push(Value v) { stack_.push_back(std::move(v)); }

  Value int_text(std::string_view s, bool long_form) {
    if (long_form && !s.empty() && s.back() == 'L') s.remove_suffix(1);
    if (!long_form && s == "01") return Value::boolean(true);
    if (!long_form && s == "00") return Value::boolean(false);
    int64_t i = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
    if (ec != std::errc() || end != s.data() + s.size()) error(fmt::format("'{}' is not an int", printable(s)));
    return Value::integer(i);
  }

  uint64_t memo_index(std::string_view s) {
    uint64_t i = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
    if (ec != std::errc() || end != s.data() + s.size()) error(fmt::format("'{}' is not a memo index", printable(s)));
    return i;
  }
  void put(uint64_t i) { memo_[i] = top(); }
  void get(uint64_t i) {
    const auto it = memo_.find(i);
    if (it == memo_.end()) error(fmt::format("the memo has no entry {}", i));
    push(it->second);
  }

  void set_items(Value& target, Value::List items) {
    if (items.size() % 2) error("SETITEMS has an odd number of values");
    Value::Dict* d = target.is(Kind::dict) ? &target.mutable_dict()
                     : target.is(Kind::object) ? &target.mutable_object().dict_items : nullptr;
    if (!d) error(fmt::format("SETITEM on {}", target.kind_name()));
    for (size_t i = 0; i < items.size(); i += 2) d->emplace_back(std::move(items[i]), std::move(items[i + 1]));
  }
  void append(Value& target, Value::List items) {
    Value::List* l = target.is(Kind::list) ? &target.mutable_items()
                     : target.is(Kind::object) ? &target.mutable_object().list_items : nullptr;
    if (!l) error(fmt::format("APPEND on {}", target.kind_name()));
    for (Value& v : items) l->push_back(std::move(v));
  }

  Value call(const Value& callable, Value args);
  void build(Value& target, Value state);
  Value loop();

  std::string_view b_;
  const std::string& origin_;
  const PickleHooks& hooks_;
  size_t pos_ = 0, op_at_ = 0;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value> memo_;
  std::vector<Value> made_;
};

Value Unpickler::call(const Value& callable, Value args) {
  if (!callable.is(Kind::object) || !callable.as_object().global)
    error(fmt::format("the pickle calls {}, not a class or function", callable.kind_name()));
  if (!args.is(Kind::tuple)) error(fmt::format("the pickle calls with {} for arguments", args.kind_name()));
  const std::string& name = callable.as_object().class_name;
  if (hooks_.call)
    if (std::optional<Value> v = hooks_.call(name, args)) return *v;
  const Value::List& a = args.items();
  if (named(callable, {"collections.OrderedDict", "builtins.dict", "__builtin__.dict"})) {
    Value d = container(Value::dict());
    if (!a.empty())
      for (const Value& pair : a[0].items()) {
        if (pair.size() != 2) error("a dict is made from pairs that are not pairs");
        d.mutable_dict().emplace_back(pair.at(0), pair.at(1));
      }
    return d;
  }
  if (named(callable, {"builtins.set", "builtins.frozenset", "__builtin__.set", "__builtin__.frozenset",
                       "builtins.list", "__builtin__.list"}))
    return container(Value::list(a.empty() ? Value::List{} : a[0].items()));
  if (named(callable, {"builtins.bytearray", "__builtin__.bytearray", "builtins.bytes"})) {
    if (a.empty()) return Value::bytes("");
    if (a[0].is(Kind::bytes)) return Value::bytes(a[0].as_bytes());
  }
  if (named(callable, {"_codecs.encode", "builtins.bytearray", "__builtin__.bytearray"}) && !a.empty() &&
      a[0].is(Kind::string)) {
    // Protocol 2 writes bytes as _codecs.encode(the bytes as code points, 'latin1').
    const bool latin1 = a.size() == 1 || (a[1].is(Kind::string) && (a[1].as_string() == "latin1" || a[1].as_string() == "latin-1"));
    if (!latin1) error("bytes encoded otherwise than as latin1");
    std::string out;
    const std::string& s = a[0].as_string();
    for (size_t i = 0; i < s.size(); ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x80) out += static_cast<char>(c);
      else if ((c == 0xc2 || c == 0xc3) && i + 1 < s.size()) out += static_cast<char>(((c & 3) << 6) | (s[++i] & 0x3f));
      else error("latin1 bytes hold a character past U+00FF");
    }
    return Value::bytes(std::move(out));
  }
  Object o;
  if (named(callable, {"copyreg._reconstructor", "copy_reg._reconstructor"})) {
    if (a.size() != 3 || !a[0].is(Kind::object)) error("copyreg._reconstructor needs (cls, base, state)");
    o.class_name = a[0].as_object().class_name;
    if (!a[2].is_null()) o.args = Value::tuple({a[2]});
  } else if (named(callable, {"copyreg.__newobj__", "copy_reg.__newobj__"})) {
    if (a.empty() || !a[0].is(Kind::object)) error("copyreg.__newobj__ needs a class");
    o.class_name = a[0].as_object().class_name;
    o.args = Value::tuple(Value::List(a.begin() + 1, a.end()));
  } else {
    o.class_name = name;
    o.args = std::move(args);
  }
  return container(Value::object(std::move(o)));
}

void Unpickler::build(Value& target, Value state) {
  switch (target.kind()) {
    case Kind::object:
      if (target.as_object().global) error("BUILD on a class");
      target.mutable_object().state = std::move(state);
      return;
    case Kind::dict: case Kind::list: case Kind::array: return;  // attributes of a subclass: dropped
    default: error(fmt::format("BUILD on {}", target.kind_name()));
  }
}

Value Unpickler::loop() {
  while (true) {
    op_at_ = pos_;
    const auto op = static_cast<unsigned char>(take(1)[0]);
    switch (op) {
      case 0x80: {  // PROTO
        const uint64_t v = uint(1);
        if (v > 5) error(fmt::format("pickle protocol {} (up to 5 is read)", v));
        break;
      }
      case 0x95: uint(8); break;  // FRAME: a length hint
      case '.': {                 // STOP
        Value v = pop();
        if (!stack_.empty() || !marks_.empty()) error("the pickle stops with values left on its stack");
        return v;
      }
      case '(': marks_.push_back(stack_.size()); break;  // MARK
      case '0': pop(); break;                              // POP
      case '1': pop_mark(); break;                         // POP_MARK
      case '2': push(top()); break;                        // DUP
      case 'N': push(Value()); break;
      case 0x88: push(Value::boolean(true)); break;
      case 0x89: push(Value::boolean(false)); break;
      case 'I': push(int_text(text_line(), false)); break;
      case 'L': push(int_text(text_line(), true)); break;
      case 'J': push(Value::integer(static_cast<int32_t>(uint(4)))); break;  // BININT
      case 'K': push(Value::integer(static_cast<int64_t>(uint(1)))); break;  // BININT1
      case 'M': push(Value::integer(static_cast<int64_t>(uint(2)))); break;  // BININT2
      case 0x8a: push(long_value(take(uint(1)))); break;                      // LONG1
      case 0x8b: push(long_value(take(uint(4)))); break;                      // LONG4 (unsigned length: checked by take)
      case 'F': {
        const std::string_view s = text_line();
        double d = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
        if (ec != std::errc() || end != s.data() + s.size()) error(fmt::format("'{}' is not a float", printable(s)));
        push(Value::real(d));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian
        std::string be(take(8));
        swap_bytes(be, 8);
        double d;
        std::memcpy(&d, be.data(), 8);
        push(Value::real(d));
        break;
      }
      case 'X': push(Value::string(std::string(take(uint(4))))); break;     // BINUNICODE
      case 0x8c: push(Value::string(std::string(take(uint(1))))); break;    // SHORT_BINUNICODE
      case 0x8d: push(Value::string(std::string(take(uint(8))))); break;    // BINUNICODE8
      case 'T': push(Value::string(std::string(take(uint(4))))); break;     // BINSTRING (Python 2's str)
      case 'U': push(Value::string(std::string(take(uint(1))))); break;     // SHORT_BINSTRING
      case 'B': push(Value::bytes(std::string(take(uint(4))))); break;      // BINBYTES
      case 'C': push(Value::bytes(std::string(take(uint(1))))); break;      // SHORT_BINBYTES
      case 0x8e: case 0x96: push(Value::bytes(std::string(take(uint(8))))); break;  // BINBYTES8, BYTEARRAY8
      case ']': push(container(Value::list())); break;
      case ')': push(Value::tuple()); break;
      case '}': push(container(Value::dict())); break;
      case 0x8f: push(container(Value::list())); break;  // EMPTY_SET
      case 'l': push(container(Value::list(pop_mark()))); break;
      case 't': push(Value::tuple(pop_mark())); break;
      case 0x91: push(container(Value::list(pop_mark()))); break;  // FROZENSET
      case 0x85: case 0x86: case 0x87: {                           // TUPLE1..3
        const size_t n = op - 0x84u;
        if (stack_.size() < floor() + n) error("the pickle makes a tuple of values that are not there");
        Value::List items(std::make_move_iterator(stack_.end() - static_cast<std::ptrdiff_t>(n)),
                          std::make_move_iterator(stack_.end()));
        stack_.resize(stack_.size() - n);
        push(Value::tuple(std::move(items)));
        break;
      }
      case 'd': {  // DICT
        Value d = container(Value::dict());
        set_items(d, pop_mark());
        push(std::move(d));
        break;
      }
      case 'a': {  // APPEND
        Value v = pop();
        append(top(), {std::move(v)});
        break;
      }
      case 'e': case 0x90: {  // APPENDS, ADDITEMS
        Value::List items = pop_mark();
        append(top(), std::move(items));
        break;
      }
      case 's': {  // SETITEM
        Value v = pop(), k = pop();
        set_items(top(), {std::move(k), std::move(v)});
        break;
      }
      case 'u': {  // SETITEMS
        Value::List items = pop_mark();
        set_items(top(), std::move(items));
        break;
      }
      case 'g': get(memo_index(text_line())); break;
      case 'h': get(uint(1)); break;
      case 'j': get(uint(4)); break;
      case 'p': put(memo_index(text_line())); break;
      case 'q': put(uint(1)); break;
      case 'r': put(uint(4)); break;
      case 0x94: put(memo_.size()); break;  // MEMOIZE
      case 'c': case 0x93: {                // GLOBAL, STACK_GLOBAL
        std::string module, name;
        if (op == 'c') {
          module = text_line();
          name = text_line();
        } else {
          const Value n = pop(), m = pop();
          if (!n.is(Kind::string) || !m.is(Kind::string)) error("STACK_GLOBAL needs a module and a name");
          name = n.as_string();
          module = m.as_string();
        }
        Object o;
        o.class_name = module + "." + name;
        o.global = true;
        push(Value::object(std::move(o)));
        break;
      }
      case 'R': {  // REDUCE
        Value args = pop();
        Value callable = pop();
        push(call(callable, std::move(args)));
        break;
      }
      case 0x81: case 0x92: {  // NEWOBJ, NEWOBJ_EX
        Value kwargs = op == 0x92 ? pop() : Value();
        Value args = pop();
        Value cls = pop();
        Value v = call(cls, std::move(args));
        if (!kwargs.is_null() && !(kwargs.is(Kind::dict) && kwargs.as_dict().empty())) {
          if (!v.is(Kind::object)) error("NEWOBJ_EX gives keyword arguments to a value that is not an object");
          v.mutable_object().kwargs = std::move(kwargs);
        }
        push(std::move(v));
        break;
      }
      case 'b': {  // BUILD
        Value state = pop();
        build(top(), std::move(state));
        break;
      }
      case 'Q': case 'P': {  // BINPERSID, PERSID
        Value pid = op == 'Q' ? pop() : Value::string(std::string(text_line()));
        if (!hooks_.persistent_load) error("the pickle refers to data outside it (a persistent id)");
        push(hooks_.persistent_load(pid));
        break;
      }
      default:
        error(fmt::format("opcode 0x{:02x}{} is not read", op,
                          op >= 0x20 && op < 0x7f ? fmt::format(" ('{}')", static_cast<char>(op)) : std::string()));
    }
  }
}

}  // namespace

Value unpickle(std::string_view bytes, const std::string& origin, const PickleHooks& hooks) {
  return Unpickler(bytes, origin, hooks).run();
}

}  // namespace tfm::io
