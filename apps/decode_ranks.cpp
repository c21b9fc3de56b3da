// SPDX-License-Identifier: BSD-3-Clause
// One frame decoded into a directory across ranks (decode_ranks.hpp): rank 0 opens the directory,
// every rank decodes its tensors into temporaries beside their files, the ranks agree on the
// first error one process would meet, and only then does every rank rename its files into place.
#include "decode_ranks.hpp"

#include "encode_ranks.hpp"
#include "ranks.hpp"

#include <gradcodec/gradcodec.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <utility>

namespace gradcodec::cli {

namespace {

// What a rank tells the others once it has decoded its share.
struct Report {
  uint64_t failed_at = UINT64_MAX;  // where one process would have met this rank's error; none: max
  uint64_t frames_read = 0;
  uint64_t bytes = 0;  // the decoded tensors'
  std::vector<std::pair<uint64_t, std::string>> warnings;  // (record, text)
};

std::vector<uint8_t> pack(const Report& r) {
  std::vector<uint8_t> b;
  ByteWriter w(b);
  w.u64(r.failed_at);
  w.u64(r.frames_read);
  w.u64(r.bytes);
  w.u64(r.warnings.size());
  for (const auto& [i, text] : r.warnings) {
    w.u64(i);
    w.u64(text.size());
    w.bytes(text.data(), text.size());
  }
  return b;
}

Report unpack(const std::vector<uint8_t>& b) {
  Report r;
  ByteReader in(b, "a rank's decode report");
  r.failed_at = in.u64();
  r.frames_read = in.u64();
  r.bytes = in.u64();
  for (uint64_t k = in.u64(); k > 0; --k) {
    const uint64_t i = in.u64();
    const auto text = in.bytes(in.u64());
    r.warnings.emplace_back(i, std::string(text.begin(), text.end()));
  }
  in.expect_end();
  return r;
}

}  // namespace

std::vector<size_t> dir_share(const std::vector<TensorInfo>& infos, int rank, int ranks) {
  FrameSource frame;
  frame.count = infos.size();
  frame.info = [&infos](size_t i) { return infos[i]; };
  const auto owner = tensor_owners(frame, ranks);
  std::vector<size_t> mine;
  for (size_t i = 0; i < infos.size(); ++i)
    if (owner(infos[i].name) == rank) mine.push_back(i);
  return mine;
}

DirDecoded decode_to_dir_across_ranks(Decoder& dec, size_t f, const std::vector<size_t>& mine,
                                      const std::function<std::unique_ptr<formats::SnapshotWriter>()>& make_writer,
                                      const std::function<void(const Tensor&)>& advance) {
  const int me = ranks::rank();
  const uint64_t n = dec.tensors(f).size();
  std::unique_ptr<formats::SnapshotWriter> writer;
  DirDecoded out;
  try {
    // Rank 0 alone creates a missing directory (and, on a failure, removes it).
    ranks::together([&] {
      if (me == 0) writer = make_writer();
    });
    // Each rank decodes its share in record order (Decoder::decode_frame of its tensors, with
    // --threads) and stops at its first error, so the lowest record that failed on any rank is
    // the first failure one process meets.
    Report mine_report;
    std::exception_ptr failed;
    size_t handed = 0;  // of `mine`, the tensors the writer has
    try {
      if (me != 0 && !mine.empty()) writer = make_writer();
      dec.decode_frame(f, mine, [&](Tensor&& t) {
        check_inputs_unchanged();  // the container shrank: its zeros are not written on
        writer->add(t);
        for (auto& w : writer->take_warnings()) mine_report.warnings.emplace_back(mine[handed], std::move(w));
        advance(t);
        mine_report.bytes += t.elements() * dtype_size(t.dtype());
        ++handed;
      });
      if (!mine.empty()) mine_report.frames_read = dec.frames_read();
      if (writer && (!mine.empty() || n == 0)) writer->complete();
      if (writer)
        for (auto& w : writer->take_warnings()) mine_report.warnings.emplace_back(n, std::move(w));
    } catch (...) {
      failed = std::current_exception();
      // Where one process meets it: at the record being decoded or written (the decoder reports
      // the lowest failing one), or after every record when completing.
      mine_report.failed_at = handed < mine.size() ? mine[handed] : n;
    }
    const auto reports = ranks::all_gather(pack(mine_report));
    int first = -1;  // the rank whose error one process meets first
    uint64_t lowest = UINT64_MAX;
    std::vector<std::pair<uint64_t, std::string>> warnings;
    uint64_t most = 0, total = 0;
    for (size_t r = 0; r < reports.size(); ++r) {
      Report got = unpack(reports[r]);
      if (got.failed_at < lowest) lowest = got.failed_at, first = static_cast<int>(r);
      out.frames_read = std::max<size_t>(out.frames_read, got.frames_read);
      most = std::max(most, got.bytes);
      total += got.bytes;
      for (auto& w : got.warnings) warnings.push_back(std::move(w));
    }
    // That rank throws its error inside together(), which hands it to every rank.
    ranks::together([&] {
      if (me == first && failed) std::rethrow_exception(failed);
    });
    ranks::together([&] {
      if (writer) writer->publish();
    });
    // The warnings in record order, as one process gives them.
    std::stable_sort(warnings.begin(), warnings.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& w : warnings) out.warnings.push_back(std::move(w.second));
    out.largest = total ? double(most) / double(total) : 1.0;
  } catch (...) {
    // Every rank's temporaries go before rank 0 removes a directory it created (it removes it
    // only when empty).
    if (me != 0) writer.reset();
    ranks::together([] {});
    writer.reset();
    throw;
  }
  return out;
}

}  // namespace gradcodec::cli
