#include "weft/core/error.h"
#include "weft/core/threads.h"

#if WEFT_HAVE_MPI

#include <chrono>
#include <climits>
#include <thread>

#include "weft/comm/detail/mpi_core.h"

namespace weft::comm::detail {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kQueryTag = 1;
// How long a rank whose operation timed out waits for its peers' answers.
constexpr auto kQueryWait = std::chrono::seconds(3);

}  // namespace

std::string mpi_error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

void check_mpi(int rc, const std::string& what, const char* call) {
  if (rc != MPI_SUCCESS) WEFT_FAIL("{}: {} failed: {}", what, call, mpi_error_string(rc));
}

int as_int(int64_t n, const std::string& what) {
  WEFT_CHECK(n <= INT_MAX,
             "{}: {} elements in one MPI message exceed MPI's int counts; split the "
             "tensor",
             what, n);
  return static_cast<int>(n);
}

MPI_Datatype element_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i64: return MPI_INT64_T;
    default: return MPI_UINT16_T;
  }
}

void Runtime::init() {
  std::lock_guard lock(mu);
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    WEFT_CHECK(rc == MPI_SUCCESS, "MPI_Init_thread failed: {}", mpi_error_string(rc));
    we_initialized = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  } else {
    MPI_Query_thread(&provided);
  }
  WEFT_CHECK(provided == MPI_THREAD_MULTIPLE,
             "the MPI library provides thread level {} but weft needs MPI_THREAD_MULTIPLE ({}); "
             "use an Open MPI built with thread support",
             provided, MPI_THREAD_MULTIPLE);
  // Ranks on one machine share its cores: divide them, as the local backend
  // does for its rank threads (oversubscribed spinning kernels are slow).
  MPI_Comm node;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
      MPI_SUCCESS) {
    int local = 1;
    MPI_Comm_size(node, &local);
    set_ranks_in_process(local);
    MPI_Comm_free(&node);
  }
}

int world_rank() {
  int initialized = 0, r = -1;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void Core::respond() {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, diag, &flag, &st) != MPI_SUCCESS || !flag) break;
    int64_t query[2];
    MPI_Recv(query, 2, MPI_INT64_T, st.MPI_SOURCE, kQueryTag, diag, MPI_STATUS_IGNORE);
    Reply& r = replies.emplace_back();
    r.data[0] = issued.load();
    r.data[1] = 0;
    MPI_Isend(r.data, 2, MPI_INT64_T, st.MPI_SOURCE, static_cast<int>(query[0]), diag, &r.req);
  }
  for (auto it = replies.begin(); it != replies.end();) {
    int done = 0;
    MPI_Test(&it->req, &done, MPI_STATUS_IGNORE);
    it = done ? replies.erase(it) : std::next(it);
  }
}

std::string Core::stragglers(OpKind kind, int64_t seq, int peer, bool on_worker) {
  int tag = 16 + next_tag.fetch_add(1) % 30000;
  std::vector<int64_t> answers(static_cast<size_t>(2 * size), -1);
  std::vector<MPI_Request> reqs;
  std::vector<int> asked;
  int64_t query[2] = {tag, 0};
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    MPI_Request s, r;
    MPI_Isend(query, 2, MPI_INT64_T, p, kQueryTag, diag, &s);
    MPI_Request_free(&s);
    MPI_Irecv(&answers[static_cast<size_t>(2 * p)], 2, MPI_INT64_T, p, tag, diag, &r);
    reqs.push_back(r);
    asked.push_back(p);
  }
  const auto deadline = Clock::now() + kQueryWait;
  int all = 0;
  while (!all && Clock::now() < deadline) {
    MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &all, MPI_STATUSES_IGNORE);
    if (on_worker) respond();
    if (!all) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<int> behind, silent;
  for (size_t i = 0; i < asked.size(); ++i) {
    int p = asked[i];
    if (reqs[i] != MPI_REQUEST_NULL) {
      MPI_Cancel(&reqs[i]);
      MPI_Request_free(&reqs[i]);
      silent.push_back(p);
    } else if (is_collective(kind) && answers[static_cast<size_t>(2 * p)] <= seq) {
      behind.push_back(p);
    }
  }
  std::string text;
  if (!is_collective(kind)) {
    text = format("waiting for rank {}", ranks_str({peer}));
  } else if (!behind.empty()) {
    text = format("ranks {} did not arrive", ranks_str(behind));
  } else if (silent.empty()) {
    text = "all ranks arrived; the operation itself did not complete";
  }
  if (!silent.empty())
    text += format("{}ranks {} did not answer (hung or dead)", text.empty() ? "" : "; ",
                   ranks_str(silent));
  return text;
}

}  // namespace weft::comm::detail

#endif  // WEFT_HAVE_MPI
