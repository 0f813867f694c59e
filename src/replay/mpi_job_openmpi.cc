// MpiJob over the MPI C API (Debian's OpenMPI; mpi_job.h). The only file that includes mpi.h.
// The C API only: without these, OpenMPI's and MPICH's mpi.h pull in their C++ bindings, which
// need a library of their own (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <time.h>

#include <climits>

#include "replay/mpi_job.h"

namespace iotwin::replay {
namespace {

Status MpiError(int code, const char* call) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(code, text, &len);
  return Status::Io("{} failed: {}", call, std::string(text, static_cast<size_t>(len)));
}

uint64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

class OpenMpiJob final : public MpiJob {
 public:
  OpenMpiJob(int rank, int size) : rank_(rank), size_(size) {}
  ~OpenMpiJob() override { MPI_Finalize(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Result<uint64_t> Barrier() override {
    if (int rc = MPI_Barrier(MPI_COMM_WORLD); rc != MPI_SUCCESS) return MpiError(rc, "MPI_Barrier");
    return RealtimeNs();
  }

  Result<std::vector<ClockOffset>> MeasureClockOffsets(int rounds) override {
    std::vector<ClockOffset> out;
    uint64_t stamp = 0;
    if (rank_ != 0) {
      for (int i = 0; i < rounds; i++) {
        if (int rc = MPI_Recv(&stamp, 1, MPI_UINT64_T, 0, kPing, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            rc != MPI_SUCCESS)
          return MpiError(rc, "MPI_Recv");
        stamp = RealtimeNs();
        if (int rc = MPI_Send(&stamp, 1, MPI_UINT64_T, 0, kPong, MPI_COMM_WORLD); rc != MPI_SUCCESS)
          return MpiError(rc, "MPI_Send");
      }
      return out;
    }
    out.resize(static_cast<size_t>(size_));
    for (int r = 1; r < size_; r++) {
      uint64_t best = UINT64_MAX;
      for (int i = 0; i < rounds; i++) {
        const uint64_t sent = RealtimeNs();
        if (int rc = MPI_Send(&sent, 1, MPI_UINT64_T, r, kPing, MPI_COMM_WORLD); rc != MPI_SUCCESS)
          return MpiError(rc, "MPI_Send");
        if (int rc = MPI_Recv(&stamp, 1, MPI_UINT64_T, r, kPong, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            rc != MPI_SUCCESS)
          return MpiError(rc, "MPI_Recv");
        const uint64_t back = RealtimeNs();
        if (back < sent || back - sent >= best) continue;  // the realtime clock stepped, or slower
        best = back - sent;
        // stamp - (sent + back) / 2, in 128 bits: stamps are near 2^61.
        const __int128 mid = (static_cast<__int128>(sent) + back) / 2;
        out[static_cast<size_t>(r)] = {static_cast<int64_t>(static_cast<__int128>(stamp) - mid),
                                       best / 2};
      }
    }
    return out;
  }

  Result<std::vector<std::string>> GatherToRoot(const std::string& mine) override {
    if (mine.size() > static_cast<size_t>(INT_MAX))
      return Status::Invalid("rank {}: {} bytes to gather (at most 2 GiB)", rank_, mine.size());
    const int len = static_cast<int>(mine.size());
    std::vector<int> lens(rank_ == 0 ? static_cast<size_t>(size_) : 0);
    if (int rc = MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
        rc != MPI_SUCCESS)
      return MpiError(rc, "MPI_Gather");
    std::vector<int> displs(lens.size());
    long long total = 0;
    for (size_t r = 0; r < lens.size(); r++) {
      displs[r] = static_cast<int>(total);
      total += lens[r];
      if (lens[r] < 0 || total > INT_MAX)
        return Status::Invalid("the ranks' summaries add up to more than 2 GiB");
    }
    std::string all(static_cast<size_t>(total), '\0');
    if (int rc = MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                             MPI_CHAR, 0, MPI_COMM_WORLD);
        rc != MPI_SUCCESS)
      return MpiError(rc, "MPI_Gatherv");
    std::vector<std::string> out;
    for (size_t r = 0; r < lens.size(); r++)
      out.push_back(all.substr(static_cast<size_t>(displs[r]), static_cast<size_t>(lens[r])));
    return out;
  }

  [[noreturn]] void Abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    __builtin_unreachable();
  }

 private:
  static constexpr int kPing = 7001, kPong = 7002;
  int rank_;
  int size_;
};

}  // namespace

Result<std::unique_ptr<MpiJob>> JoinMpiJob() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return Status::Invalid("--mpi: MPI is already initialised in this process");
  if (int rc = MPI_Init(nullptr, nullptr); rc != MPI_SUCCESS) return MpiError(rc, "MPI_Init");
  // Errors come back as values, not as the default handler's abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiJob>(std::make_unique<OpenMpiJob>(rank, size));
}

bool MpiBuiltIn() { return true; }

}  // namespace iotwin::replay
