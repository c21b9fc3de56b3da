// SPDX-License-Identifier: BSD-3-Clause
// HDF5 reader (HDF5 C API, 1.10.x; 1.12+ handled where the object-visit API differs): open_hdf5
// lists and inspects every dataset before anything is allocated; Hdf5Reader reads one on demand.
// The lock, errors and handles are in hdf5_common.hpp, the datatype mapping in hdf5_types.hpp.
//
// Decisions (to be copied into docs/ by whoever owns them):
// - Datasets are listed with H5Ovisit by name, ascending, depth first: the order h5py's
//   visititems() shows. A dataset reachable through several hard links is listed once, under its
//   first name; soft and external links are not followed; notes() names every link not read
//   under its own name (the other hard links too). A dataset "a/b/c" becomes tensor
//   "a.b.c".
// - A dataset with an H5S_NULL dataspace (h5py.Empty) has no shape and no data: it is not listed
//   as an array; notes() names it as skipped (the CLI shows that as a warning).
// - The file may not change while it is read: libhdf5 answers a read of data the file no longer
//   holds (truncated after it was opened) with zeros, not an error. Every read() therefore checks,
//   after H5Dread, that the file's size, modification time and inode are still those seen when it
//   was opened, and throws Error(Input) naming the dataset otherwise: a read is exact or fails,
//   never quietly made of fill values. (A file truncated before it is opened is refused by
//   libhdf5 itself: its superblock records the end of the file.)
// - Floats: IEEE f16 (h5py's float16: 2 bytes, fields 15,10,5,0,10, bias 15), bfloat16 (2 bytes,
//   fields 15,7,8,0,7, bias 127), f32, f64, little- or big-endian. Their bytes are read exactly as
//   stored (no HDF5 conversion, so NaN payloads survive) and byte-swapped here when big-endian;
//   TensorInfo::big_endian records that. Everything else is DType::Other with a numpy descr.
// - Non-float datasets are DType::Other with numpy's descr, data converted to numpy's packed
//   little-endian layout: ints "<i8", h5py's bool enum "|b1", h5py's complex {r,i} "<c8"/"<c16",
//   fixed strings "|S5", opaque "|V3", other enums as their base integer, compounds as a list descr
//   "[('a', '<i4'), ('b', '<f8', (3,))]", HDF5 array types as extra trailing dims (as h5py does).
//   Variable-length data, references, bf16 inside compounds and unusual floats are listed (descr
//   "|O" or "|V<n>") but read() throws naming the dataset. So do datasets whose data lives in other
//   files (external storage, virtual datasets: never opened) and those needing a filter this
//   libhdf5 lacks (h5py's lzf, blosc, ...).
// - Two datasets whose names map to the same tensor name ("a.b" and "a/b") make open() fail.
// - Sizes are checked before anything is allocated: every datatype is validated (compound members
//   inside the compound, array dims matching the size, sane float fields); contiguous data must
//   lie inside the file; unallocated data (fill values) may not exceed 64 MiB; chunked/compact
//   data may not exceed max(64 MiB, 1100 x the file size) (deflate's best ratio is ~1032:1).
// - Known limit: libhdf5 1.10.8 itself can still crash on some hostile metadata (a few in 10^3
//   randomly corrupted files, inside H5Dopen/B-tree decoding, before this code sees any value).
#include "readers.hpp"

#include "hdf5_attrs.hpp"
#include "hdf5_common.hpp"
#include "hdf5_types.hpp"

#include <gradcodec/detail/pages.hpp>

#include <gradcodec/error.hpp>

#include <hdf5.h>

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gradcodec::formats {

using namespace h5;

namespace {

struct Entry {
  std::string h5path;  // "/layer1/0/conv1/weight"
  TensorInfo info;
  ReadHow how = ReadHow::Raw;
  size_t swap_unit = 1;
  uint64_t item_size = 0;  // bytes per element in memory
  std::string why;
};

// Upper bound for data that has no storage of its own in the file (unallocated fill values,
// chunked datasets whose compressed size says little): never allocate more than this, or more
// than deflate's best ratio (~1032:1) allows for the file's size.
constexpr uint64_t kMaxUnbackedBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxExpansion = 1100;

#if H5_VERSION_GE(1, 12, 0)
using ObjInfo = H5O_info2_t;
using LinkInfo = H5L_info2_t;
#else
using ObjInfo = H5O_info_t;
using LinkInfo = H5L_info_t;
#endif

// An object's identity in the file, to match a hard link with the name an object was visited by.
#if H5_VERSION_GE(1, 12, 0)
using ObjKey = std::vector<unsigned char>;
ObjKey key_of(const ObjInfo& info) {
  const auto* b = reinterpret_cast<const unsigned char*>(&info.token);
  return ObjKey(b, b + sizeof info.token);
}
#else
using ObjKey = haddr_t;
ObjKey key_of(const ObjInfo& info) { return info.addr; }
#endif

struct VisitState {
  std::vector<std::string> datasets;
  std::vector<std::pair<std::string, H5O_type_t>> objects;  // in visit order (for their attributes)
  std::set<std::string> visited;          // every object, under the name H5Ovisit gave it
  std::map<ObjKey, std::string> linked;   // objects with several hard links → that name
  bool failed = false;
};

herr_t visit_object(hid_t, const char* name, const ObjInfo* info, void* data) noexcept {
  auto* s = static_cast<VisitState*>(data);
  try {
    if (!info || !name) return 0;
    if (info->type == H5O_TYPE_DATASET) s->datasets.emplace_back(name);
    s->visited.emplace(name);
    s->objects.emplace_back(name, info->type);
    if (info->rc > 1) s->linked.emplace(key_of(*info), name);
    return 0;
  } catch (...) {
    s->failed = true;
    return -1;
  }
}

herr_t visit_all(hid_t file, VisitState& state) {
#if H5_VERSION_GE(1, 12, 0)
  return H5Ovisit3(file, H5_INDEX_NAME, H5_ITER_INC, visit_object, &state, H5O_INFO_BASIC);
#else
  return H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, visit_object, &state, H5O_INFO_BASIC);
#endif
}

// Soft, external and user-defined links: not followed (a soft link's target is read under its
// own name if it is a dataset; another file is never opened), but named in the reader's notes so
// that nothing in the file is left out without a word.
struct LinkState {
  const VisitState* objects = nullptr;
  std::vector<std::string> notes;
  uint64_t more = 0;  // links past the first kMaxLinkNotes
  bool failed = false;
};
constexpr size_t kMaxLinkNotes = 20;

// Built by appends (GCC 12 warns falsely, -Wrestrict, on "/" + std::string).
std::string alias_note(const std::string& where, H5O_type_t type, const std::string& first) {
  std::string note = "hard link ";
  note += where;
  note += type == H5O_TYPE_DATASET ? " names the same dataset as /"
          : type == H5O_TYPE_GROUP ? " names the same group as /"
                                   : " names the same object as /";
  if (first != ".") note += printable(first);  // H5Ovisit names the root group "."
  note += type == H5O_TYPE_GROUP ? ", whose datasets are read once, under that name"
                                 : ", which is read once, under that name";
  return note;
}

herr_t visit_link(hid_t group, const char* name, const LinkInfo* info, void* data) noexcept {
  auto* s = static_cast<LinkState*>(data);
  try {
    if (!info || !name) return 0;
    // A hard link is another name of an object H5Ovisit listed under its first name, unless it
    // is that name: the object is read once, and this name is not written back.
    if (info->type == H5L_TYPE_HARD && s->objects->visited.count(name)) return 0;
    if (s->notes.size() >= kMaxLinkNotes) {
      ++s->more;
      return 0;
    }
    std::string where(1, '/');  // (not "/" + ...: GCC 12's false -Wrestrict)
    where += printable(name);
    if (info->type == H5L_TYPE_HARD) {
      ObjInfo oi{};
#if H5_VERSION_GE(1, 12, 0)
      const herr_t r = H5Oget_info_by_name3(group, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT);
#else
      const herr_t r = H5Oget_info_by_name2(group, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT);
#endif
      if (r < 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
      }
      const auto first = s->objects->linked.find(key_of(oi));
      if (first != s->objects->linked.end()) s->notes.push_back(alias_note(where, oi.type, first->second));
    } else if (info->type == H5L_TYPE_SOFT) {
      std::string target;
      const size_t n = info->u.val_size;
      if (n > 0 && n <= 4096) {
        std::vector<char> buf(n + 1, '\0');
        if (H5Lget_val(group, name, buf.data(), n, H5P_DEFAULT) >= 0) target = printable(buf.data());
        else H5Eclear2(H5E_DEFAULT);
      }
      s->notes.push_back("soft link " + where + (target.empty() ? "" : " -> " + target) +
                         " is not followed (a dataset it names is read under its own name)");
    } else if (info->type == H5L_TYPE_EXTERNAL) {
      s->notes.push_back("external link " + where + " is not followed (other files are never opened)");
    } else {
      s->notes.push_back("user-defined link " + where + " is not followed");
    }
    return 0;
  } catch (...) {
    s->failed = true;
    return -1;
  }
}

std::vector<std::string> link_notes(hid_t file, const VisitState& objects) {
  LinkState state;
  state.objects = &objects;
#if H5_VERSION_GE(1, 12, 0)
  const herr_t r = H5Lvisit2(file, H5_INDEX_NAME, H5_ITER_INC, visit_link, &state);
#else
  const herr_t r = H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, visit_link, &state);
#endif
  if (r < 0 || state.failed) {
    H5Eclear2(H5E_DEFAULT);
    state.notes.push_back("its links could not all be listed; some datasets may be missing");
  }
  if (state.more) state.notes.push_back("and " + std::to_string(state.more) + " more links not followed or not read");
  return state.notes;
}

const char* filter_name(H5Z_filter_t f) {
  switch (f) {
    case H5Z_FILTER_DEFLATE: return "gzip";
    case H5Z_FILTER_SHUFFLE: return "shuffle";
    case H5Z_FILTER_FLETCHER32: return "fletcher32";
    case H5Z_FILTER_SZIP: return "szip";
    case H5Z_FILTER_NBIT: return "nbit";
    case H5Z_FILTER_SCALEOFFSET: return "scaleoffset";
    case 32000: return "lzf";
    case 32001: return "blosc";
    case 32004: return "lz4";
    case 32008: return "bitshuffle";
    case 32015: return "zstd";
    default: return "unknown";
  }
}

// What identifies the state of a file on disk: compared after every read to the state at open.
struct FileStamp {
  uint64_t size = 0;
  int64_t mtime_s = 0;
  int64_t mtime_ns = 0;
  uint64_t ino = 0;
  uint64_t dev = 0;
  bool operator==(const FileStamp& o) const {
    return size == o.size && mtime_s == o.mtime_s && mtime_ns == o.mtime_ns && ino == o.ino && dev == o.dev;
  }
};

std::optional<FileStamp> stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  FileStamp s;
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_s = static_cast<int64_t>(st.st_mtim.tv_sec);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_nsec);
  s.ino = static_cast<uint64_t>(st.st_ino);
  s.dev = static_cast<uint64_t>(st.st_dev);
  return s;
}

class Hdf5Reader final : public SnapshotReader {
 public:
  // `stamp`: the file's state when it was opened (none for an in-memory image, which cannot change).
  Hdf5Reader(std::shared_ptr<const InputFile> file, Hid fid, std::vector<Entry> entries, std::vector<std::string> notes,
             std::optional<FileStamp> stamp)
      : file_(std::move(file)),
        fid_(std::move(fid)),
        entries_(std::move(entries)),
        notes_(std::move(notes)),
        stamp_(stamp) {
    infos_.reserve(entries_.size());
    for (const auto& e : entries_) infos_.push_back(e.info);
  }
  ~Hdf5Reader() override {
    H5Lock lock;
    fid_.close();
  }

  Format format() const override { return Format::Hdf5; }
  const std::string& path() const override { return file_->path(); }
  const std::vector<TensorInfo>& arrays() const override { return infos_; }
  std::vector<std::string> notes() const override { return notes_; }
  std::string attributes_json() const override { return attrs_; }
  void set_attributes(std::string json) { attrs_ = std::move(json); }

  std::string unreadable(size_t i) const override {
    if (i >= entries_.size() || entries_[i].how != ReadHow::Unreadable) return {};
    return entries_[i].why;
  }

  Tensor read(size_t i) override {
    if (i >= entries_.size())
      fail(ErrorCode::Internal, path() + ": array index " + std::to_string(i) + " out of range");
    const Entry& e = entries_[i];
    auto bad = [&](const std::string& what) -> Error {
      return Error(ErrorCode::Input, path() + ": dataset " + printable(e.h5path) + ": " + what);
    };
    Tensor t;
    t.info = e.info;
    if (e.how == ReadHow::Unreadable) throw bad(e.why);
    if (e.how == ReadHow::Null) return t;
    uint64_t n = e.info.elements();
    if (n == 0) return t;
    uint64_t bytes = n * e.item_size;  // bounded when the entry was made
    std::shared_ptr<uint8_t[]> buf(new uint8_t[bytes]);
    prepare_written(buf.get(), bytes);  // H5Dread fills it whole: mapped ahead, not a fault per 4 KiB

    H5Lock lock;
    try {
      Hid ds = dataset_hid(H5Dopen2(fid_.get(), e.h5path.c_str(), H5P_DEFAULT));
      if (!ds.valid()) throw bad(with_detail("cannot open"));
      Hid ft = type_hid(H5Dget_type(ds.get()));
      if (!ft.valid()) throw bad(with_detail("cannot read the datatype"));
      TensorInfo again;
      again.shape = {};
      ReadPlan p = plan_read(ft.get(), again);
      if (p.how != e.how || p.item_size != e.item_size) throw bad("datatype changed while reading");
      if (H5Dread(ds.get(), p.mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.get()) < 0)
        throw bad(with_detail("cannot read data"));
      // libhdf5 fills what lies past the end of a file that shrank with zeros: a read is only
      // trusted when the file is still the one that was opened.
      if (stamp_) {
        const std::optional<FileStamp> now = stamp_of(path());
        if (!now)
          throw bad("the file disappeared while it was read; its data may be fill values, so none is used");
        if (!(*now == *stamp_)) {
          std::string what = "the file changed while it was read (";
          what += std::to_string(stamp_->size);
          what += " bytes when opened, ";
          what += std::to_string(now->size);
          what += " now); its data may be fill values, so none is used";
          throw bad(what);
        }
      }
    } catch (const TypeFailure& f) {
      throw bad(f.what);
    }
    byte_swap(buf.get(), bytes, e.swap_unit);
    const uint8_t* data = buf.get();
    t.data = Buffer::view(std::shared_ptr<const void>(buf, buf.get()), data, bytes);
    return t;
  }

 private:
  std::shared_ptr<const InputFile> file_;
  Hid fid_;
  std::vector<Entry> entries_;
  std::vector<TensorInfo> infos_;
  std::vector<std::string> notes_;
  std::string attrs_;
  std::optional<FileStamp> stamp_;
};

// Inspects one dataset; throws Error(Input) for a dataset that lies about itself.
Entry inspect(hid_t fid, const std::string& path, const std::string& rel, uint64_t file_size) {
  Entry e;
  e.h5path = "/" + rel;
  e.info.name = rel;
  std::replace(e.info.name.begin(), e.info.name.end(), '/', '.');
  auto bad = [&](const std::string& what) -> Error {
    return Error(ErrorCode::Input, path + ": dataset " + printable(e.h5path) + ": " + what);
  };
  try {
    Hid ds = dataset_hid(H5Dopen2(fid, e.h5path.c_str(), H5P_DEFAULT));
    if (!ds.valid()) throw bad(with_detail("cannot open"));
    Hid space = space_hid(H5Dget_space(ds.get()));
    if (!space.valid()) throw bad(with_detail("cannot read the dataspace"));
    H5S_class_t sc = H5Sget_simple_extent_type(space.get());
    bool null_space = false;
    if (sc == H5S_SIMPLE) {
      int rank = H5Sget_simple_extent_ndims(space.get());
      if (rank < 0 || rank > H5S_MAX_RANK) throw bad(with_detail("bad dataspace rank"));
      std::vector<hsize_t> dims(static_cast<size_t>(rank));
      if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)
        throw bad(with_detail("cannot read the dataspace"));
      e.info.shape.assign(dims.begin(), dims.end());
    } else if (sc == H5S_SCALAR) {
      e.info.shape.clear();
    } else if (sc == H5S_NULL) {
      null_space = true;  // not listed: see the decisions at the top
    } else {
      throw bad(with_detail("unknown dataspace class"));
    }
    std::optional<uint64_t> space_elems = null_space ? 0 : checked_elements(e.info.shape);
    if (!space_elems) throw bad("dataspace " + shape_string(e.info.shape) + " has too many elements");

    Hid ft = type_hid(H5Dget_type(ds.get()));
    if (!ft.valid()) throw bad(with_detail("cannot read the datatype"));
    ReadPlan p = plan_read(ft.get(), e.info);
    if (null_space) e.info.shape = {0};
    e.how = null_space ? ReadHow::Null : p.how;
    e.swap_unit = p.swap_unit;
    e.item_size = p.item_size;
    e.why = p.why;
    std::optional<uint64_t> elems_or = checked_elements(e.info.shape);  // includes array-type dims
    if (!elems_or) throw bad("shape " + shape_string(e.info.shape) + " has too many elements");
    uint64_t elems = *elems_or;
    if (e.how != ReadHow::Raw && e.how != ReadHow::Convert) return e;
    if (elems == 0) return e;

    size_t file_item = H5Tget_size(ft.get());
    if (file_item == 0) throw bad("datatype of size 0");
    if (*space_elems > std::numeric_limits<uint64_t>::max() / file_item ||
        elems > std::numeric_limits<uint64_t>::max() / e.item_size)
      throw bad("declares more data than can be addressed");
    uint64_t stored = *space_elems * file_item;  // bytes the elements take in the file (with array dims)
    uint64_t in_memory = elems * e.item_size;

    Hid dcpl = plist_hid(H5Dget_create_plist(ds.get()));
    if (!dcpl.valid()) throw bad(with_detail("cannot read the creation properties"));
    int ext = H5Pget_external_count(dcpl.get());
    if (ext < 0) throw bad(with_detail("cannot read the storage properties"));
    if (ext > 0) {
      e.how = ReadHow::Unreadable;
      e.why = "data in external files is not read (security)";
      return e;
    }
    H5D_layout_t layout = H5Pget_layout(dcpl.get());
    if (layout == H5D_VIRTUAL) {
      e.how = ReadHow::Unreadable;
      e.why = "virtual datasets (data in other files) are not read";
      return e;
    }
    int nfilters = H5Pget_nfilters(dcpl.get());
    for (int k = 0; k < nfilters; ++k) {
      unsigned flags = 0;
      size_t nelem = 0;
      char fname[64] = {0};
      unsigned config = 0;
      H5Z_filter_t fid_k =
          H5Pget_filter2(dcpl.get(), static_cast<unsigned>(k), &flags, &nelem, nullptr, sizeof fname, fname, &config);
      if (fid_k < 0) throw bad(with_detail("cannot read the filter pipeline"));
      if (H5Zfilter_avail(fid_k) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        e.how = ReadHow::Unreadable;
        e.why = std::string("compressed with filter ") + filter_name(fid_k) + " (id " + std::to_string(fid_k) +
                "), which this build cannot decode";
        return e;
      }
    }

    if (layout == H5D_CONTIGUOUS) {
      haddr_t addr = H5Dget_offset(ds.get());
      H5Eclear2(H5E_DEFAULT);
      if (addr == HADDR_UNDEF) {
        if (stored > kMaxUnbackedBytes)
          throw bad("declares " + std::to_string(stored) + " bytes but none are stored in the file");
      } else if (addr > file_size || stored > file_size - addr) {
        throw bad("data of " + std::to_string(stored) + " bytes at offset " + std::to_string(addr) +
                  " extends beyond the end of the file (" + std::to_string(file_size) + " bytes)");
      }
    } else {
      uint64_t cap = file_size > std::numeric_limits<uint64_t>::max() / kMaxExpansion
                         ? std::numeric_limits<uint64_t>::max()
                         : std::max(kMaxUnbackedBytes, file_size * kMaxExpansion);
      if (stored > cap)
        throw bad("declares " + std::to_string(stored) + " bytes, implausible for a file of " +
                  std::to_string(file_size) + " bytes");
    }
    if (in_memory > std::max<uint64_t>(stored, 1) * 4)
      throw bad("declares an implausible amount of data");
    return e;
  } catch (const TypeFailure& f) {
    throw bad(f.what);
  }
}

std::atomic<uint64_t> g_image_counter{0};

}  // namespace

std::unique_ptr<SnapshotReader> open_hdf5(std::shared_ptr<const InputFile> file) {
  const std::string& path = file->path();
  H5Lock lock;
  Hid fapl = plist_hid(H5Pcreate(H5P_FILE_ACCESS));
  if (!fapl.valid()) fail(ErrorCode::Input, path + ": " + with_detail("cannot set up HDF5"));
  if (H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG) < 0 || !relax_file_locking(fapl.get()))
    fail(ErrorCode::Input, path + ": " + with_detail("cannot set up HDF5"));
  Hid fid;
  if (path == "<stdin>") {
    // The data came through a pipe: open the memory image with the core driver (copied once).
    if (file->size() < 8)
      fail(ErrorCode::Input, path + ": not an HDF5 file (" + std::to_string(file->size()) + " bytes)");
    if (H5Pset_fapl_core(fapl.get(), 1 << 20, 0) < 0 ||
        H5Pset_file_image(fapl.get(), const_cast<uint8_t*>(file->data()), file->size()) < 0)
      fail(ErrorCode::Input, path + ": " + with_detail("cannot load the HDF5 image"));
    // A unique name: HDF5 identifies open files by name for the core driver.
    std::string name = "gradcodec-stdin-image-" + std::to_string(++g_image_counter);
    fid = file_hid(H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get()));
  } else {
    fid = file_hid(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()));
  }
  if (!fid.valid()) fail(ErrorCode::Input, path + ": " + with_detail("not a readable HDF5 file"));

  hsize_t fsize = 0;
  if (H5Fget_filesize(fid.get(), &fsize) < 0) {
    H5Eclear2(H5E_DEFAULT);
    fsize = file->size();
  }
  uint64_t file_size = fsize;
  // The state the reads are checked against; taken after H5Fopen, whose own check refuses a file
  // shorter than its superblock says.
  std::optional<FileStamp> stamp;
  if (path != "<stdin>") {
    stamp = stamp_of(path);
    if (!stamp) fail(ErrorCode::Input, path + ": cannot read the file's status");
  }

  VisitState state;
  if (visit_all(fid.get(), state) < 0 || state.failed)
    fail(ErrorCode::Input, path + ": " + with_detail("cannot list the datasets"));

  std::vector<Entry> entries;
  std::map<std::string, std::string> names;  // tensor name → HDF5 path
  entries.reserve(state.datasets.size());
  std::vector<std::string> notes;
  for (const std::string& rel : state.datasets) {
    Entry e = inspect(fid.get(), path, rel, file_size);
    if (e.how == ReadHow::Null) {  // h5py.Empty: no shape, no data, no tensor
      notes.push_back("skipping dataset " + printable(e.h5path) +
                      ": its dataspace is null (h5py.Empty), which has no shape and no data");
      continue;
    }
    auto [it, fresh] = names.emplace(e.info.name, e.h5path);
    if (!fresh)
      fail(ErrorCode::Input, path + ": datasets " + printable(it->second) + " and " + printable(e.h5path) +
                                 " both map to tensor name '" + printable(e.info.name) + "'");
    entries.push_back(std::move(e));
  }
  for (std::string& note : link_notes(fid.get(), state)) notes.push_back(std::move(note));
  // Attributes of the root group, then of every group and dataset in visit order (named
  // datatypes are not read, nor their attributes).
  std::map<std::string, std::string> tensor_of;  // HDF5 path → tensor name
  for (const auto& e : entries) tensor_of.emplace(e.h5path, e.info.name);
  std::vector<AttrObject> with_attrs{{"/", ""}};
  for (const auto& [rel, type] : state.objects) {
    if (rel == ".") continue;  // the root group, listed first above
    const std::string h5path = "/" + rel;
    if (type == H5O_TYPE_GROUP) with_attrs.push_back({h5path, ""});
    if (type != H5O_TYPE_DATASET) continue;
    if (auto it = tensor_of.find(h5path); it != tensor_of.end()) with_attrs.push_back({h5path, it->second});
  }
  std::string attrs = read_attributes(fid.get(), with_attrs, notes);
  auto reader = std::make_unique<Hdf5Reader>(std::move(file), std::move(fid), std::move(entries), std::move(notes), stamp);
  reader->set_attributes(std::move(attrs));
  return reader;
}

}  // namespace gradcodec::formats
