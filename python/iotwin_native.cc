// iotwin._native: the C++ half of the Python module (python/iotwin/__init__.py is the API,
// docs/python.md). Reads traces through interop::ColumnReader, the table export's own row
// functions, and hands each column over as a NumPy array: numbers as they are, text as uint32
// codes into a list of distinct values. Errors come back as iotwin.TraceError (an OSError and a
// ValueError) with the reader's message, which names the file and the byte offset.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "format/op_info.h"
#include "format/records.h"
#include "format/trace_reader.h"
#include "interop/table_columns.h"
#include "model/scope.h"

namespace py = pybind11;

constexpr auto kReplaceInvalid = nlohmann::json::error_handler_t::replace;

namespace iotwin::python {
namespace {

PyObject* g_trace_error = nullptr;

struct TraceError {
  std::string message;
};

[[noreturn]] void Raise(const Status& s) { throw TraceError{s.message()}; }

template <typename T>
T Check(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}

// Names are bytes: decoded as os.fsdecode does (UTF-8, other bytes as lone surrogates), so
// os.fsencode gives the trace's bytes back.
py::str Decode(std::string_view bytes) {
  PyObject* s = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()),
                                     "surrogateescape");
  if (!s) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

py::dtype DtypeOf(const interop::Column& c) {
  if (c.kind == interop::Column::Kind::kText) return py::dtype("u4");
  const char sign = c.kind == interop::Column::Kind::kSigned ? 'i' : 'u';
  return py::dtype(std::string(1, sign) + std::to_string(c.width));
}

// How a column's values are handed over.
enum class HandOver {
  kCopy,  // a copy
  kTake,  // the array adopts the column's buffer (no copy; the column is empty afterwards)
  kView,  // a view of the buffer, valid until the reader reads again (to_numpy's batches)
};

// The column's first `rows` values as an array. `owner`: what keeps a view's buffer alive.
py::array ColumnArray(interop::Column& c, size_t rows, HandOver how, py::handle owner) {
  const py::dtype dtype = DtypeOf(c);
  const std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(rows)};
  if (how == HandOver::kView) {
    return py::array(dtype, shape, std::vector<py::ssize_t>{}, c.data.get(), owner);
  }
  if (how == HandOver::kCopy) {
    py::array a(dtype, shape, std::vector<py::ssize_t>{});
    if (rows) std::memcpy(a.mutable_data(), c.data.get(), rows * c.width);
    return a;
  }
  char* data = c.data.release();
  py::capsule base(data, [](void* p) { std::free(p); });
  return py::array(dtype, shape, std::vector<py::ssize_t>{}, data, base);
}

// One table as a dict: name, rows, columns [(name, kind, array, dictionary)], where kind is
// "u", "i" or "text" and dictionary, for text, the values from `dict_from[name]` on (earlier
// ones were handed over by an earlier batch).
py::dict TableDict(interop::ColumnTable& t, HandOver how, py::dict dict_from,
                   py::handle owner = py::none()) {
  py::list columns;
  for (interop::Column& c : t.columns()) {
    if (!c.stored) continue;
    py::object dictionary = py::none();
    const char* kind = c.kind == interop::Column::Kind::kSigned ? "i" : "u";
    if (c.kind == interop::Column::Kind::kText) {
      kind = "text";
      size_t from = 0;
      if (dict_from.contains(c.name.c_str())) from = dict_from[c.name.c_str()].cast<size_t>();
      py::list values;
      for (size_t i = from; i < c.dictionary.size(); i++) values.append(Decode(c.dictionary[i]));
      dictionary = values;
    }
    columns.append(py::make_tuple(c.name, kind, ColumnArray(c, t.rows(), how, owner),
                                  dictionary));
  }
  py::dict d;
  d["name"] = t.stem();
  d["rows"] = t.rows();
  d["columns"] = columns;
  return d;
}

// A trace opened for its header, its summary and the tables it holds.
class Trace {
 public:
  Trace(const std::string& path, bool salvage) : path_(path), salvage_(salvage) {
    TraceReaderOptions options;
    options.salvage = salvage;
    reader_ = Check(TraceReader::Open(path, options));
  }
  std::string HeaderJson() const { return reader_->meta().dump(-1, ' ', false, kReplaceInvalid); }
  py::object SummaryJson() const {
    if (!reader_->summary()) return py::none();
    return py::str(reader_->summary()->dump(-1, ' ', false, kReplaceInvalid));
  }
  std::string FormatVersion() const {
    return std::to_string(reader_->format_major()) + "." + std::to_string(reader_->format_minor());
  }
  // The tables whose record types occur, in the export's order (one pass over the records).
  std::vector<std::string> Tables() {
    std::set<uint16_t> types;
    {
      py::gil_scoped_release release;
      TraceReaderOptions options;
      options.salvage = salvage_;
      auto reader = Check(TraceReader::Open(path_, options));
      for (;;) {
        const iot_rec_hdr* h = Check(reader->Next());
        if (!h) break;
        types.insert(h->type);
      }
      if (reader->damage().truncated && !salvage_) {
        Raise(Status::Corrupt("{}", reader->damage().truncated_detail));
      }
    }
    std::vector<std::string> names;
    for (uint16_t type : types) {
      const std::string_view name = interop::TableOf(type);
      if (!name.empty()) names.emplace_back(name);
    }
    return names;
  }

 private:
  std::string path_;
  bool salvage_;
  std::unique_ptr<TraceReader> reader_;
};

// The most rows a read makes room for at once (64 Mi: 512 MiB of address space per 8-byte
// column); the hint comes from the trace's footer, which is untrusted.
constexpr size_t kMaxReserveRows = size_t{1} << 26;

// A query running over one trace, read whole or in batches.
class Reader {
 public:
  Reader(const std::string& path, std::vector<std::string> tables,
         std::vector<std::string> columns, std::vector<std::string> op_words, uint64_t ts_from,
         uint64_t ts_to, std::string path_glob, bool salvage, size_t reserve_rows,
         std::vector<uint64_t> tgids, std::vector<uint64_t> tids) {
    // The words of the command line's --filter op=: op names, `reads`, `writes`.
    std::vector<std::string> ops;
    for (const std::string& word : op_words) {
      const std::vector<uint16_t> named = OpsNamedBy(word);
      if (named.empty()) {
        throw py::value_error("unknown op '" + word +
                              "' in where= (a system call such as pread64, or reads, writes)");
      }
      for (uint16_t op : named) ops.emplace_back(OpName(op));
    }
    if (!path_glob.empty()) {
      const Status s = model::CheckGlob("where path", path_glob);
      if (!s.ok()) throw py::value_error(s.message());
    }
    interop::ColumnQuery q;
    q.tables = std::move(tables);
    q.columns = std::move(columns);
    q.ops = std::move(ops);
    q.tgids = std::move(tgids);
    q.tids = std::move(tids);
    q.ts_from = ts_from;
    q.ts_to = ts_to;
    q.path_glob = std::move(path_glob);
    q.reserve_rows = std::min(reserve_rows, kMaxReserveRows);
    reader_ = Check(interop::ColumnReader::Open(path, std::move(q), salvage));
  }

  // Reads until a table holds `max_rows` rows (0: to the end); false once the trace has ended.
  bool Read(size_t max_rows) {
    py::gil_scoped_release release;
    return Check(reader_->Read(max_rows ? max_rows : SIZE_MAX));
  }
  // The tables read so far; `take` hands the buffers over (the last call of a whole read);
  // `view` gives views that the next read overwrites (no copy: to_numpy, which copies each
  // batch into its array before reading the next).
  py::list Tables(bool take, py::dict dict_from, bool view) {
    const HandOver how = take ? HandOver::kTake : view ? HandOver::kView : HandOver::kCopy;
    py::object self = py::cast(this, py::return_value_policy::reference);
    py::list out;
    for (interop::ColumnTable* t : reader_->Tables()) {
      out.append(TableDict(*t, how, dict_from, self));
    }
    return out;
  }
  void Clear() {
    for (interop::ColumnTable* t : reader_->Tables()) t->Clear();
  }
  py::dict Files() { return TableDict(reader_->Files(), HandOver::kTake, py::dict()); }
  // The path of every file known so far, by file id.
  py::list FilePaths() const {
    py::list paths;
    for (size_t id = 0; id < reader_->FileCount(); id++) {
      paths.append(Decode(reader_->FilePath(static_cast<uint32_t>(id))));
    }
    return paths;
  }

 private:
  std::unique_ptr<interop::ColumnReader> reader_;
};

// Copies rows [first, last) of a contiguous column of `width`-byte values into a field.
void CopyField(char* field, size_t row_bytes, const char* data, size_t width, size_t first,
               size_t last) {
  auto copy = [&](auto tag) {
    constexpr size_t w = sizeof(tag);
    for (size_t r = first; r < last; r++) std::memcpy(field + r * row_bytes, data + r * w, w);
  };
  switch (width) {
    case 1: return copy(uint8_t{});
    case 2: return copy(uint16_t{});
    case 4: return copy(uint32_t{});
    case 8: return copy(uint64_t{});
    default:
      for (size_t r = first; r < last; r++) {
        std::memcpy(field + r * row_bytes, data + r * width, width);
      }
  }
}

// The rows of a structured array, built batch by batch in memory of its own: anonymous pages
// (zeros: object fields read as NULL until filled), with transparent huge pages asked for, since
// the kernel faulting in and zeroing fresh memory 4 KiB at a time is a large part of the time.
// The room, first the footer's count of rows (capped), grows with mremap (no copy). Finish
// hands the memory to a NumPy array whose capsule releases the objects field by field: NumPy's
// own release of an array it owns walks the dtype's fields dictionary once per row (seconds for
// millions of rows).
class StructuredBuilder {
 public:
  StructuredBuilder(py::dtype dtype, size_t expected_rows) : dtype_(std::move(dtype)) {
    block_ = std::make_unique<Block>();
    block_->row_bytes = std::max<size_t>(1, static_cast<size_t>(dtype_.itemsize()));
    py::dict fields = dtype_.attr("fields").is_none() ? py::dict() : dtype_.attr("fields");
    for (auto item : fields) {
      py::tuple info = item.second.cast<py::tuple>();
      if (info[0].cast<py::dtype>().kind() == 'O') {
        block_->object_offsets.push_back(info[1].cast<size_t>());
      }
    }
    // At most 4 GiB of address space at first, whatever the footer says.
    const size_t most = std::max<size_t>(1024, (size_t{4} << 30) / block_->row_bytes);
    Reserve(std::clamp<size_t>(expected_rows, 1024, most));
    StartPrefault();
  }
  ~StructuredBuilder() { StopPrefault(); }

  // Appends rows: `fields` holds, per field of the dtype, in order, either a contiguous array
  // of the field's type or a pair (codes, values): the field takes values[codes[i]] (int64 or
  // uint32 codes; -1 is the last value). Every field has the same number of rows.
  void Append(py::list fields);

  py::array Finish() {
    if (!block_) throw py::value_error("StructuredBuilder: finished");
    StopPrefault();
    Block* b = block_.get();
    // Room beyond the rows goes back, with the pages prefaulted there (at most kAhead).
    const size_t used = PageRound(std::max<size_t>(1, b->rows * b->row_bytes));
    if (used < b->bytes) {
      munmap(b->data + used, b->bytes - used);
      b->bytes = used;
    }
    py::capsule owner(block_.release(), [](void* p) { delete static_cast<Block*>(p); });
    return py::array(dtype_, std::vector<py::ssize_t>{static_cast<py::ssize_t>(b->rows)},
                     std::vector<py::ssize_t>{}, b->data, owner);
  }

 private:
  struct Block {
    char* data = nullptr;
    size_t rows = 0, row_bytes = 0, bytes = 0;
    std::vector<size_t> object_offsets;
    ~Block() {
      if (!data) return;
      for (size_t r = 0; r < rows; r++) {
        for (size_t offset : object_offsets) {
          PyObject* o;
          std::memcpy(&o, data + r * row_bytes + offset, sizeof o);
          Py_XDECREF(o);
        }
      }
      munmap(data, bytes);
    }
  };
  static size_t PageRound(size_t bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
  }
  void Reserve(size_t rows) {
    Block& b = *block_;
    const size_t bytes = PageRound(rows * b.row_bytes);
    if (bytes <= b.bytes) return;
    const bool prefaulting = prefault_.joinable();
    StopPrefault();  // the mapping may move
    // MAP_NORESERVE: the room is a guess (an untrusted footer's count); only filled rows and
    // the prefault's lead are ever touched.
    void* data = b.data ? mremap(b.data, b.bytes, bytes, MREMAP_MAYMOVE)
                        : mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (data == MAP_FAILED) {
      const std::string what = "to_numpy: no room for " + std::to_string(rows) + " rows (" +
                               std::to_string(bytes) + " bytes): " + std::strerror(errno);
      PyErr_SetString(PyExc_MemoryError, what.c_str());
      throw py::error_already_set();
    }
    madvise(data, bytes, MADV_HUGEPAGE);  // advice only: failure changes nothing
    b.data = static_cast<char*>(data);
    b.bytes = bytes;
    if (prefaulting) StartPrefault();
  }

  // Faults the room in from a second thread, ahead of the rows being filled: on a fresh
  // mapping the kernel's zeroing of pages costs about as much as reading the rows (docs/python.md,
  // "Speed"), and this way it runs on another CPU at the same time. MADV_POPULATE_WRITE (Linux
  // 5.14) only faults pages in, so the filling thread may write them meanwhile.
  void StartPrefault() {
    char* data = block_->data;
    const size_t bytes = block_->bytes;
    stop_prefault_ = false;
    // At most kAhead past the rows filled: a footer that overstates the rows (it is untrusted)
    // costs no more memory than that.
    prefault_ = std::thread([this, data, bytes] {
      constexpr size_t kStep = size_t{32} << 20, kAhead = size_t{256} << 20;
      for (size_t at = filled_bytes_.load(std::memory_order_relaxed) / kStep * kStep;
           at < bytes && !stop_prefault_.load(std::memory_order_relaxed);) {
        if (at > filled_bytes_.load(std::memory_order_relaxed) + kAhead) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
        if (madvise(data + at, std::min(kStep, bytes - at), MADV_POPULATE_WRITE) != 0) break;
        at += kStep;
      }
    });
  }
  void StopPrefault() {
    if (!prefault_.joinable()) return;
    stop_prefault_ = true;
    py::gil_scoped_release release;
    prefault_.join();
  }

  py::dtype dtype_;
  std::unique_ptr<Block> block_;
  std::thread prefault_;
  std::atomic<bool> stop_prefault_{false};
  std::atomic<size_t> filled_bytes_{0};
};

void StructuredBuilder::Append(py::list fields) {
  if (!block_) throw py::value_error("StructuredBuilder: finished");
  py::dict dtype_fields = dtype_.attr("fields");
  py::list names = dtype_.attr("names");
  struct Source {
    size_t offset, width;
    const char* data = nullptr;   // numbers
    const char* codes = nullptr;  // text
    size_t code_width = 0;
    std::vector<PyObject*> values;
  };
  std::vector<Source> sources;
  std::vector<py::object> keep;  // owns the arrays read below
  if (names.size() != fields.size()) throw py::value_error("StructuredBuilder: field count");
  size_t rows = 0;
  for (size_t i = 0; i < fields.size(); i++) {
    py::tuple field_info = dtype_fields[names[i]];
    Source src;
    src.offset = field_info[1].cast<size_t>();
    py::dtype field_type = field_info[0];
    src.width = static_cast<size_t>(field_type.itemsize());
    py::handle f = fields[i];
    py::array a;
    if (py::isinstance<py::tuple>(f)) {
      py::tuple pair = f.cast<py::tuple>();
      a = py::array::ensure(pair[0], py::array::c_style);
      py::list values = pair[1];
      if (!a || (a.itemsize() != 4 && a.itemsize() != 8) || values.empty() ||
          field_type.kind() != 'O') {
        throw py::value_error("StructuredBuilder: bad text field");
      }
      src.codes = static_cast<const char*>(a.data());
      src.code_width = static_cast<size_t>(a.itemsize());
      for (py::handle v : values) src.values.push_back(v.ptr());
      keep.push_back(values);
    } else {
      a = py::array::ensure(f, py::array::c_style);
      if (!a || !a.dtype().is(field_type) || field_type.kind() == 'O') {
        throw py::value_error("StructuredBuilder: bad number field");
      }
      src.data = static_cast<const char*>(a.data());
    }
    if (i == 0) rows = static_cast<size_t>(a.size());
    if (static_cast<size_t>(a.size()) != rows) {
      throw py::value_error("StructuredBuilder: fields of different lengths");
    }
    keep.push_back(a);
    sources.push_back(std::move(src));
  }
  Block& b = *block_;
  if (b.rows + rows > b.bytes / b.row_bytes) Reserve(std::max(b.rows + rows, 2 * b.rows));
  // In blocks of rows, field by field: each block of the output stays in the cache while its
  // fields are written, and each source is read in order.
  char* base = b.data + b.rows * b.row_bytes;
  constexpr size_t kBlock = 2048;
  for (size_t first = 0; first < rows; first += kBlock) {
    const size_t last = std::min(rows, first + kBlock);
    for (const Source& src : sources) {
      char* field = base + src.offset;
      if (src.data) {
        CopyField(field, b.row_bytes, src.data, src.width, first, last);
        continue;
      }
      const size_t n = src.values.size();
      for (size_t r = first; r < last; r++) {
        int64_t code;
        if (src.code_width == 8) {
          std::memcpy(&code, src.codes + r * 8, 8);
        } else {
          uint32_t c32;
          std::memcpy(&c32, src.codes + r * 4, 4);
          code = c32;
        }
        PyObject* v = src.values[code < 0 || static_cast<size_t>(code) >= n ? n - 1 : code];
        Py_INCREF(v);
        std::memcpy(field + r * b.row_bytes, &v, sizeof v);
      }
    }
  }
  b.rows += rows;
  filled_bytes_.store(b.rows * b.row_bytes, std::memory_order_relaxed);
}

}  // namespace
}  // namespace iotwin::python

PYBIND11_MODULE(_native, m) {
  using namespace iotwin::python;
  m.doc() = "iotwin trace reader (C++ half of the iotwin package)";
  // Both: a damaged file is bad data (ValueError) read from a file (OSError).
  py::tuple bases = py::make_tuple(py::handle(PyExc_OSError), py::handle(PyExc_ValueError));
  g_trace_error = PyErr_NewExceptionWithDoc(
      "iotwin.TraceError", "A trace that cannot be read: missing, damaged or truncated.",
      bases.ptr(), nullptr);
  if (!g_trace_error) throw py::error_already_set();
  m.attr("TraceError") = py::handle(g_trace_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const TraceError& e) {
      PyErr_SetString(g_trace_error, e.message.c_str());
    }
  });

  m.def("table_names", [] {
    std::vector<std::string> names;
    for (uint16_t type = 0; type <= IOT_REC_MAX; type++) {
      const std::string_view name = iotwin::interop::TableOf(type);
      if (!name.empty()) names.emplace_back(name);
    }
    names.emplace_back("files");
    return names;
  });
  py::class_<StructuredBuilder>(m, "StructuredBuilder")
      .def(py::init<py::dtype, size_t>(), py::arg("dtype"), py::arg("expected_rows"))
      .def("append", &StructuredBuilder::Append, py::arg("fields"))
      .def("finish", &StructuredBuilder::Finish);
  py::class_<Trace>(m, "Trace")
      .def(py::init<const std::string&, bool>(), py::arg("path"), py::arg("salvage") = false)
      .def("header_json", &Trace::HeaderJson)
      .def("summary_json", &Trace::SummaryJson)
      .def("format_version", &Trace::FormatVersion)
      .def("tables", &Trace::Tables);
  py::class_<Reader>(m, "Reader")
      .def(py::init<const std::string&, std::vector<std::string>, std::vector<std::string>,
                    std::vector<std::string>, uint64_t, uint64_t, std::string, bool, size_t,
                    std::vector<uint64_t>, std::vector<uint64_t>>(),
           py::arg("path"), py::arg("tables"), py::arg("columns"), py::arg("ops"),
           py::arg("ts_from"), py::arg("ts_to"), py::arg("path_glob"), py::arg("salvage"),
           py::arg("reserve_rows") = 0, py::arg("tgids") = std::vector<uint64_t>{},
           py::arg("tids") = std::vector<uint64_t>{})
      .def("read", &Reader::Read, py::arg("max_rows") = 0)
      .def("tables", &Reader::Tables, py::arg("take"), py::arg("dict_from"),
           py::arg("view") = false)
      .def("clear", &Reader::Clear)
      .def("files", &Reader::Files)
      .def("file_paths", &Reader::FilePaths);
}
