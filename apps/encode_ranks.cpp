// SPDX-License-Identifier: BSD-3-Clause
// `gradcodec encode` across ranks (encode_ranks.hpp): each rank encodes its tensors into a
// PartEncoder, the ranks exchange the parts' descriptions, rank 0 makes the output's temporary,
// every rank writes its records into it with MPI-IO, and rank 0 renames it into place.
#include "encode_ranks.hpp"

#include "ranks.hpp"

#include <gradcodec/gradcodec.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <optional>

namespace gradcodec::cli {

std::function<int(const std::string&)> tensor_owners(const FrameSource& first, int ranks) {
  std::vector<std::pair<uint64_t, size_t>> by_size;  // (bytes, place), largest first
  for (size_t i = 0; i < first.count; ++i) {
    const TensorInfo info = first.info(i);
    const uint64_t bytes = is_float(info.dtype) ? info.elements() * dtype_size(info.dtype) : info.elements();
    by_size.emplace_back(bytes, i);
  }
  std::stable_sort(by_size.begin(), by_size.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<uint64_t> load(static_cast<size_t>(ranks), 0);
  auto owner = std::make_shared<std::map<std::string, int>>();
  for (const auto& [bytes, i] : by_size) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    load[static_cast<size_t>(r)] += std::max<uint64_t>(bytes, 1);
    (*owner)[first.info(i).name] = r;
  }
  return [owner, ranks](const std::string& name) {
    auto it = owner->find(name);
    if (it != owner->end()) return it->second;
    uint64_t h = 1469598103934665603ull;  // FNV-1a: the same on every rank and every build
    for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
    return static_cast<int>(h % static_cast<uint64_t>(ranks));
  };
}

EncodeSummary encode_across_ranks(double& largest, const EncoderOptions& options, std::vector<OpenInput>& inputs,
                                  const std::vector<std::string>& recorded, const std::string& output, bool overwrite) {
  if (output == "-") fail(ErrorCode::Usage, "under MPI the container is written to a file: give -o FILE, not -o -");
  const int me = ranks::rank();
  std::unique_ptr<PartEncoder> part;
  uint64_t mine = 0;  // this rank's input bytes
  // Each rank encodes its tensors and stops at its first error. The ranks then agree on the
  // error one process would meet first: the lowest (frame, record) that failed on any rank.
  // This rank's failing record is the first of its own after the last it committed (a part
  // commits its records in record order, and meets their errors in that order).
  std::exception_ptr failed;
  uint64_t failed_frame = UINT64_MAX, failed_record = UINT64_MAX;
  {
    size_t frame = 0;
    std::optional<std::string> last;  // the last record of this frame this rank committed
    EncoderOptions o = options;
    o.progress = [&last, chained = options.progress](const TensorInfo& t) {
      last = t.name;
      if (chained) chained(t);
    };
    std::function<int(const std::string&)> owner;
    try {
      FrameSource first = frame_source(inputs.at(0));
      owner = tensor_owners(first, ranks::size());
      part = std::make_unique<PartEncoder>(o, [owner, me](const std::string& name) { return owner(name) == me; });
      for (; frame < inputs.size(); ++frame) {
        last.reset();
        FrameSource src = frame_source(inputs[frame]);
        src.recorded = recorded[frame];
        for (const auto& t : part->add_frame(src)) mine += t.input_bytes;
      }
    } catch (...) {
      failed = std::current_exception();
      failed_frame = frame;
      failed_record = 0;
      try {  // the record: this rank's next after `last` (the frame's end when none is left)
        if (owner && frame < inputs.size()) {
          const FrameSource src = frame_source(inputs[frame]);
          size_t i = 0;
          if (last)
            while (i < src.count && src.info(i).name != *last) ++i;
          for (i = last ? i + 1 : 0; i < src.count && owner(src.info(i).name) != me; ++i) {
          }
          failed_record = i;
        }
      } catch (...) {  // (the frame cannot be read again: its error is met at its start)
      }
    }
  }
  std::vector<uint8_t> where(16);
  std::memcpy(where.data(), &failed_frame, 8);
  std::memcpy(where.data() + 8, &failed_record, 8);
  int first_failed = -1;
  std::pair<uint64_t, uint64_t> lowest{UINT64_MAX, UINT64_MAX};
  const auto all = ranks::all_gather(where);
  for (size_t r = 0; r < all.size(); ++r) {
    std::pair<uint64_t, uint64_t> at;
    std::memcpy(&at.first, all[r].data(), 8);
    std::memcpy(&at.second, all[r].data() + 8, 8);
    if (at.first != UINT64_MAX && at < lowest) lowest = at, first_failed = static_cast<int>(r);
  }
  // That rank throws its error inside together(), which hands it to every rank.
  ranks::together([&] {
    if (me == first_failed && failed) std::rethrow_exception(failed);
  });
  const std::vector<std::vector<uint8_t>> parts = ranks::all_gather(part->describe());
  uint64_t most = 0, total = 0;
  for (const auto& b : ranks::all_gather(std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&mine),
                                                              reinterpret_cast<const uint8_t*>(&mine) + 8))) {
    uint64_t v = 0;
    std::memcpy(&v, b.data(), 8);
    most = std::max(most, v);
    total += v;
  }
  largest = total ? double(most) / double(total) : 1.0;
  // Rank 0 makes the temporary (refusing an existing output without --force) and names it.
  std::unique_ptr<AtomicOutput> out;
  std::string temp;
  ranks::together([&] {
    if (me != 0) return;
    out = std::make_unique<AtomicOutput>(output, overwrite);
    temp = out->temp_path();
    if (temp.empty())
      fail(ErrorCode::Usage, output + ": is a device or a FIFO; under MPI the container is written to a regular file");
    out->release_handle();
  });
  temp = ranks::broadcast(temp);
  EncodeSummary summary;
  std::unique_ptr<ranks::SharedFile> file;
  ranks::together([&] { file = std::make_unique<ranks::SharedFile>(temp); });
  ranks::together([&] {
    summary = part->write(parts, me == 0, [&](uint64_t at, std::span<const uint8_t> b) { file->write_at(at, b); });
  });
  ranks::together([&] { file->close(); });
  ranks::together([&] {
    if (out) out->commit();
  });
  return summary;
}

}  // namespace gradcodec::cli
