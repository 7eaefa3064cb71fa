// A restricted unpickler: Python's pickle protocols 2 to 5 (and the text
// forms of ints, floats and memo indices of the older ones) read into an
// io::Value, never executing anything. torch.save's data.pkl is its user.
//
// What the opcodes build: None, bools, ints (LONG1/LONG4 beyond int64
// become the nearest float), floats, str (a string), bytes and bytearray
// (bytes), lists, tuples, dicts (in insertion order), sets and frozensets
// (lists). A global (GLOBAL, STACK_GLOBAL) is an Object with `global` set:
// the class or function itself. Calling one (REDUCE, NEWOBJ, NEWOBJ_EX)
// first asks the caller's `call` hook, then knows:
//   collections.OrderedDict      a dict
//   builtins.set, frozenset      a list
//   builtins.bytearray           bytes
//   _codecs.encode(s, 'latin1')  bytes (how protocol 2 writes bytes)
//   copyreg._reconstructor(cls, base, state)  an Object of cls, args (state)
//   copyreg.__newobj__(cls, *args)            an Object of cls, args
// and makes an Object of the class with its args for every other name.
// BUILD sets an Object's state; on a dict, list or array (an OrderedDict's
// _metadata attribute) the state is dropped. Persistent ids (BINPERSID)
// are given to the `persistent_load` hook.
//
// A malformed pickle (truncated, an opcode outside this list, a stack or
// mark that is not there, a memo index never put, a value that contains
// itself) is one Error naming `origin` and the offset.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "libcore/io/value.h"

namespace tfm::io {

struct PickleHooks {
  // The value of calling the global `name` with `args` (a tuple), or
  // nullopt for the unpickler to decide. May throw Error.
  std::function<std::optional<Value>(const std::string& name, const Value& args)> call;
  // The object a persistent id stands for; without this hook a
  // persistent id is an Error.
  std::function<Value(const Value& pid)> persistent_load;
};

// The unpickled value, named `origin` (Value::name_tree).
Value unpickle(std::string_view bytes, const std::string& origin, const PickleHooks& hooks);

}  // namespace tfm::io
