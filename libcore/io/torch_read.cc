#include "libcore/io/torch_read.h"

#include <map>
#include <optional>

#include "libcore/base/error.h"
#include "libcore/io/foreign_bytes.h"
#include "libcore/io/pickle.h"
#include "libcore/io/read_file.h"
#include "libcore/io/zip_read.h"

namespace tfm::io {

namespace {

using Kind = Value::Kind;

std::optional<ElementType> storage_type(std::string_view name) {
  static constexpr std::pair<std::string_view, ElementType> kTypes[] = {
      {"torch.DoubleStorage", ElementType::f64}, {"torch.FloatStorage", ElementType::f32},
      {"torch.HalfStorage", ElementType::f16},   {"torch.BFloat16Storage", ElementType::bf16},
      {"torch.LongStorage", ElementType::i64},   {"torch.IntStorage", ElementType::i32},
      {"torch.ShortStorage", ElementType::i16},  {"torch.CharStorage", ElementType::i8},
      {"torch.ByteStorage", ElementType::u8},    {"torch.BoolStorage", ElementType::boolean},
      {"torch.UntypedStorage", ElementType::u8}};
  for (const auto& [n, t] : kTypes)
    if (n == name) return t;
  return std::nullopt;
}

class TorchFile {
 public:
  TorchFile(std::string bytes, const std::string& origin)
      : origin_(origin), file_size_(bytes.size()), zip_(std::move(bytes), origin) {}

  Value read() {
    // The archive's one folder holds data.pkl (its name is the file's stem
    // when it was saved, which a rename does not change).
    const ZipEntry* pickle = nullptr;
    for (const ZipEntry& e : zip_.entries()) {
      const size_t slash = e.name.find('/');
      if (slash != std::string::npos && e.name.substr(slash) == "/data.pkl") {
        pickle = &e;
        prefix_ = e.name.substr(0, slash + 1);
        break;
      }
    }
    if (!pickle) fail("{} is a ZIP archive without data.pkl: not a file of torch.save", origin_);
    if (const ZipEntry* order = zip_.find(prefix_ + "byteorder")) {
      const std::string o = zip_.read(*order);
      if (o != "little" && o != "big") fail("{}: its byteorder is '{}', neither little nor big", origin_, printable(o));
      big_endian_ = o == "big";
    }
    PickleHooks hooks;
    hooks.call = [this](const std::string& name, const Value& args) { return call(name, args); };
    hooks.persistent_load = [this](const Value& pid) { return storage(pid); };
    return unpickle(zip_.read(*pickle), origin_, hooks);
  }

 private:
  // ('storage', torch.FloatStorage, KEY, LOCATION, NUMEL): the storage as
  // a 1-D array, read once per KEY.
  Value storage(const Value& pid) {
    if (!pid.is(Kind::tuple) || pid.size() < 5 || !pid.at(0).is(Kind::string) || pid.at(0).as_string() != "storage")
      fail("{}: the pickle refers to data that is not a storage", origin_);
    const Value& cls = pid.at(1);
    const Value& key = pid.at(2);
    if (!cls.is(Kind::object) || !key.is(Kind::string) || !pid.at(4).is(Kind::integer))
      fail("{}: a storage reference is malformed", origin_);
    const std::string& type_name = cls.as_object().class_name;
    const auto type = storage_type(type_name);
    if (!type) fail("{}: storage {} is a {}, which is not read", origin_, printable(key.as_string()), printable(type_name));
    if (const auto it = storages_.find(key.as_string()); it != storages_.end()) return it->second;
    const std::string entry_name = prefix_ + "data/" + key.as_string();
    const ZipEntry* entry = zip_.find(entry_name);
    if (!entry) fail("{}: storage {} has no entry {} in the archive", origin_, printable(key.as_string()), printable(entry_name));
    const int64_t numel = pid.at(4).as_int();
    const size_t width = element_size(*type);
    if (numel < 0 || static_cast<uint64_t>(numel) > entry->size / width || entry->size != static_cast<uint64_t>(numel) * width)
      fail("{}: storage {} holds {} bytes, not {} elements of {}", origin_, printable(key.as_string()), entry->size, numel,
           element_name(*type));
    Array a;
    a.type = *type;
    a.shape = {numel};
    a.data = zip_.read(*entry);
    if (big_endian_) swap_bytes(a.data, width);
    return storages_[key.as_string()] = Value::array(std::move(a));
  }

  std::vector<int64_t> ints(const Value& v, std::string_view what) {
    if (!v.is(Kind::tuple) && !v.is(Kind::list)) fail("{}: a tensor's {} is {}, not a tuple", origin_, what, v.kind_name());
    std::vector<int64_t> out;
    for (const Value& d : v.items()) {
      if (!d.is(Kind::integer)) fail("{}: a tensor's {} holds {}", origin_, what, d.kind_name());
      out.push_back(d.as_int());
    }
    return out;
  }

  // _rebuild_tensor(_v2)(storage, offset, size, stride, ...): the view,
  // copied out in C order.
  Value tensor(const Value::List& a) {
    if (a.size() < 4 || !a[0].is(Kind::array) || !a[1].is(Kind::integer))
      fail("{}: a tensor is rebuilt from arguments that are not (storage, offset, size, stride)", origin_);
    const Array& s = a[0].as_array();
    // A stride of 0 (an expanded tensor) may make a view larger than its
    // storage, but not larger than this.
    const uint64_t limit = 64 * file_size_ + (1u << 20);
    return Value::array(gather(s.type, s.data, a[1].as_int(), ints(a[2], "size"), ints(a[3], "stride"), limit,
                               fmt::format("{}: a tensor", origin_)));
  }

  std::optional<Value> call(const std::string& name, const Value& args) {
    const Value::List& a = args.items();
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") return tensor(a);
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty() || !a[0].is(Kind::array)) fail("{}: a parameter is rebuilt from something else than a tensor", origin_);
      return a[0];
    }
    if (name == "torch._tensor._rebuild_from_type_v2" || name == "torch._tensor._rebuild_from_type") {
      // (func, new_type, args, state): func(*args), a tensor of a subclass.
      if (a.size() < 3 || !a[0].is(Kind::object) || !a[2].is(Kind::tuple))
        fail("{}: a tensor subclass is rebuilt from malformed arguments", origin_);
      if (std::optional<Value> v = call(a[0].as_object().class_name, a[2])) return v;
      return std::nullopt;
    }
    if (name == "torch.Size") return Value::tuple(a.empty() ? Value::List{} : a[0].items());
    return std::nullopt;
  }

  const std::string& origin_;
  size_t file_size_;
  ZipReader zip_;
  std::string prefix_;
  bool big_endian_ = false;
  std::map<std::string, Value> storages_;
};

}  // namespace

Value read_torch(const std::string& path) { return parse_torch(read_file(path), path); }

Value parse_torch(std::string bytes, const std::string& origin) {
  if (!looks_like_zip(bytes)) {
    // The legacy format is a pickle (protocol 2: 0x80 0x02 then a magic
    // number); older still, a tar archive.
    const bool pickle = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80;
    const bool tar = bytes.size() >= 262 && bytes.compare(257, 5, "ustar") == 0;
    if (pickle || tar)
      fail("{} is in PyTorch's legacy format (saved before PyTorch 1.6 or without the zip format): re-save it with a "
           "newer PyTorch (torch.save(torch.load(f), f))",
           origin);
    fail("{} is not a file of torch.save (it is not a ZIP archive)", origin);
  }
  return TorchFile(std::move(bytes), origin).read();
}

}  // namespace tfm::io
