// SPDX-License-Identifier: BSD-3-Clause
#include "base/mapped_inputs.hpp"

#include <gradcodec/input_changes.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

namespace gradcodec {

namespace {

// One listed mapping. A slot is claimed (`used`) by list_mapping, then its fields are written
// between two increments of `seq` (odd while they change): the signal handler, which may run
// while another thread lists or unlists a mapping, reads a slot's fields only between two equal
// even values of `seq` (a sequence lock; the handler never waits). The faulting mapping's own
// slot does not change while it faults: the thread touching it holds the InputFile alive.
struct Slot {
  std::atomic<bool> used{false};
  std::atomic<uint32_t> seq{0};
  std::atomic<uintptr_t> begin{0}, end{0};
  std::atomic<const char*> path{nullptr};
  std::atomic<int> code{0};
};

// Encode opens every input of a sequence, and a directory of .npy files maps each file, before
// the first tensor is read: room for that many at once.
constexpr int kSlots = 16384;
Slot g_slots[kSlots];
std::atomic<unsigned> g_next{0};  // where the search for a free slot starts

// The first change recorded: the path copied (its InputFile may be gone when it is reported).
std::atomic<int> g_claimed{0};
std::atomic<bool> g_recorded{false};
char g_path[4096];
std::atomic<int> g_code{0};

void record(const char* path, int code) noexcept {
  if (g_claimed.exchange(1) != 0) return;
  size_t i = 0;
  for (; path && path[i] && i + 1 < sizeof g_path; ++i) g_path[i] = path[i];
  g_path[i] = 0;
  g_code.store(code);
  g_recorded.store(true);
}

}  // namespace

int list_mapping(const void* begin, size_t bytes, const char* path, ErrorCode code) noexcept {
  const unsigned start = g_next.fetch_add(1, std::memory_order_relaxed);
  for (int k = 0; k < kSlots; ++k) {
    Slot& s = g_slots[(start + static_cast<unsigned>(k)) % kSlots];
    bool expected = false;
    if (!s.used.compare_exchange_strong(expected, true)) continue;
    s.seq.fetch_add(1);  // odd: being written
    s.begin.store(reinterpret_cast<uintptr_t>(begin));
    s.end.store(reinterpret_cast<uintptr_t>(begin) + bytes);
    s.path.store(path);
    s.code.store(static_cast<int>(code));
    s.seq.fetch_add(1);
    return static_cast<int>((start + static_cast<unsigned>(k)) % kSlots);
  }
  return -1;
}

void unlist_mapping(int slot) noexcept {
  if (slot < 0 || slot >= kSlots) return;
  Slot& s = g_slots[slot];
  s.seq.fetch_add(1);
  s.begin.store(0);
  s.end.store(0);
  s.path.store(nullptr);
  s.seq.fetch_add(1);
  s.used.store(false);
}

namespace {

// The listed mapping holding `a`: its slot, with its end, path and code; null when none does.
Slot* find(uintptr_t a, uintptr_t& e, const char*& path, int& code) noexcept {
  for (Slot& s : g_slots) {
    const uint32_t s1 = s.seq.load();
    if (s1 & 1) continue;  // being written: not the faulting mapping's slot, which is stable
    const uintptr_t b = s.begin.load();
    e = s.end.load();
    path = s.path.load();
    code = s.code.load();
    if (s.seq.load() == s1 && a >= b && a < e) return &s;
  }
  return nullptr;
}

}  // namespace

bool recover_input_fault(const void* addr) noexcept {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  uintptr_t e = 0;
  const char* path = nullptr;
  int code = 0;
  if (find(a, e, path, code)) {
    // Zero pages from the faulting one to the end of the mapping: the file is truncated there
    // (or unreadable), and a page at a time would cost a signal per 4 KiB of what is left.
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t from = a & ~(page - 1), to = (e + page - 1) & ~(page - 1);
    void* m = ::mmap(reinterpret_cast<void*>(from), to - from, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                     -1, 0);
    if (m == MAP_FAILED) return false;
    record(path, code);
    return true;
  }
  return false;
}

std::optional<Error> input_change() {
  if (!g_recorded.load()) return std::nullopt;
  return Error(static_cast<ErrorCode>(g_code.load()),
               std::string(g_path) + ": the file shrank (or could not be read) while it was being read");
}

void check_inputs_unchanged() {
  if (auto e = input_change()) throw *e;
}

void check_range_readable(const void* p, size_t n) {
  uintptr_t e = 0;
  const char* path = nullptr;
  int code = 0;
  // Touched only inside a listed mapping: a bad pointer elsewhere must not become a crash here.
  if (p && n && find(reinterpret_cast<uintptr_t>(p), e, path, code)) {
    n = static_cast<size_t>(std::min<uintptr_t>(n, e - reinterpret_cast<uintptr_t>(p)));
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const volatile uint8_t* b = static_cast<const volatile uint8_t*>(p);
    uintptr_t at = reinterpret_cast<uintptr_t>(p);
    const uintptr_t end = at + n;
    (void)b[0];
    for (at = (at | (page - 1)) + 1; at < end; at += page)
      (void)*reinterpret_cast<const volatile uint8_t*>(at);
  }
  check_inputs_unchanged();
}

}  // namespace gradcodec
