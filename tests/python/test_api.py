# SPDX-License-Identifier: BSD-3-Clause
"""The numpy API of the Python module (docs/python.md) on the bundled real gradients, against
the CLI: the same records, the same decoded tensors, the same inspect record, the same merge."""

import json
import subprocess
import sys

import numpy as np
import pytest

import gradcodec
from conftest import CLI, SOURCE, cli, container, load_npz, records

# Stateless and stateful, deterministic and stochastic, sparse, quantized and low-rank.
PRESETS = ["lossless", "topk-1pct", "qsgd4", "terngrad", "onebit", "tcs", "powersgd-r2", "bird+"]


def test_importing_gradcodec_does_not_import_torch():
    code = "import sys, gradcodec; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.parametrize("preset", PRESETS)
def test_records_are_the_clis(tmp_path, steps, preset):
    paths, frames = steps
    out = tmp_path / "cli.gcz"
    cli("encode", *paths, "-o", out, "--preset", preset, "--seed", 7)
    mine = gradcodec.encode(frames, preset=preset, seed=7, threads=2)
    theirs = out.read_bytes()
    assert records(mine) == records(theirs)
    # The header differs only in the description of the inputs.
    c, d = gradcodec.open(mine), gradcodec.open(theirs)
    assert (c.pipeline, c.seed, c.keyframe_interval, c.tool) == (d.pipeline, d.seed, d.keyframe_interval, d.tool)
    assert c.inputs == [] and [i["format"] for i in d.inputs] == ["npz", "npz"]


def test_a_different_seed_gives_different_records(steps):
    _, frames = steps
    a = gradcodec.encode(frames[0], preset="terngrad", seed=7)
    b = gradcodec.encode(frames[0], preset="terngrad", seed=8)
    assert records(a) != records(b)


@pytest.mark.parametrize("preset", ["qsgd4", "powersgd-r2"])
def test_decoded_tensors_are_the_clis(tmp_path, steps, preset):
    paths, frames = steps
    gcz = tmp_path / "run.gcz"
    gradcodec.encode(frames, gcz, preset=preset, seed=3)
    cli("decode", gcz, "-o", tmp_path / "out.npz", "--frame", 1)
    theirs = load_npz(tmp_path / "out.npz")
    mine = gradcodec.decode(gcz, frame=1)
    assert list(mine) == list(theirs) == list(frames[1])
    for name, arr in mine.items():
        assert arr.dtype == theirs[name].dtype and arr.shape == theirs[name].shape
        assert arr.tobytes() == theirs[name].tobytes(), name


def test_lossless_gives_back_every_bit(steps):
    _, frames = steps
    got = gradcodec.decode(gradcodec.encode(frames[0]))
    assert list(got) == list(frames[0])
    for name, arr in frames[0].items():
        assert got[name].dtype == arr.dtype and got[name].shape == arr.shape
        assert got[name].tobytes() == arr.tobytes(), name


def test_open_lists_frames_and_tensors_without_decoding(tmp_path, steps):
    _, frames = steps
    path = tmp_path / "seq.gcz"
    assert gradcodec.encode(frames, path, preset="topk-1pct", seed=11, keyframe_interval=2) is None
    with gradcodec.open(path) as c:
        assert len(c) == 2 and [f.index for f in c.frames] == [0, 1]
        assert [f.keyframe for f in c.frames] == [True, False]
        assert c.pipeline == gradcodec.canonical_pipeline(preset="topk-1pct")
        assert c.seed == 11 and c.keyframe_interval == 2 and c.tool == "gradcodec " + gradcodec.__version__
        infos = c.tensors(1)
        assert [t.name for t in infos] == list(frames[1])
        assert [t.shape for t in infos] == [a.shape for a in frames[1].values()]
        assert [t.dtype for t in infos] == [a.dtype for a in frames[1].values()]
        whole = c.read(-1)
        name = infos[3].name
        assert c.read_tensor(1, name).tobytes() == whole[name].tobytes()
        with pytest.raises(KeyError):
            c.read_tensor(0, "no.such.tensor")
        with pytest.raises(IndexError):
            c.read(2)


def test_inspect_is_the_clis_json(tmp_path, steps):
    paths, frames = steps
    path = tmp_path / "run.gcz"
    gradcodec.encode(frames, path, preset="sbc", seed=1)
    assert gradcodec.inspect(path) == json.loads(cli("inspect", "--json", path).stdout)
    quick = gradcodec.inspect(path, decode=False)
    assert quick == json.loads(cli("inspect", "--json", "--no-decode", path).stdout)
    from_bytes = gradcodec.inspect(path.read_bytes())
    assert from_bytes.pop("file") is None
    assert from_bytes == {k: v for k, v in gradcodec.inspect(path).items() if k != "file"}


def test_merge_is_the_clis(tmp_path, steps):
    _, frames = steps
    workers = []
    for w, frame in enumerate(frames):
        p = tmp_path / f"w{w}.gcz"
        gradcodec.encode(frame, p, preset="ssdm", seed=w)
        workers.append(p)
    out = tmp_path / "m.gcz"
    cli("merge", *workers, "-o", out, "--method", "marsit", "--seed", 5)
    merged = gradcodec.merge(workers, method="marsit", seed=5)
    assert records(merged) == records(out.read_bytes())
    from_bytes = gradcodec.merge([p.read_bytes() for p in workers], method="marsit", seed=5)
    assert records(from_bytes) == records(merged)
    summary = gradcodec.merge(workers, tmp_path / "m2.gcz", method="mean")
    assert summary["frames"] == 1 and summary["tensors"] == len(frames[0])
    assert (tmp_path / "m2.gcz").stat().st_size == summary["bytes_written"]


# The figures of a bench row that do not depend on the timing or on the container's framing.
CODEC_FIELDS = ("label", "pipeline", "sweep", "deterministic", "lossless", "parameters", "kept", "input_bytes",
                "bits_index", "bits_value", "bits_scale_side", "rel_l2", "cosine", "max_abs_error",
                "sign_agreement", "nonfinite_values", "seeds", "stage_stats")


def test_bench_rows_are_the_clis(tmp_path, steps):
    paths, frames = steps
    presets = ["lossless", "topk-1pct", "qsgd4"]
    rows = gradcodec.bench(frames, presets=presets, repeat=1, min_time=0)
    args = [a for p in presets for a in ("--preset", p)]
    report = json.loads(cli("bench", *paths, *args, "--repeat", 1, "--min-time", 0, "--json", "-").stdout)
    assert [r["label"] for r in rows] == presets
    for mine, theirs, preset in zip(rows, report["rows"], presets):
        assert {k: mine[k] for k in CODEC_FIELDS} == {k: theirs[k] for k in CODEC_FIELDS}
        assert [(f["input_bytes"], f["rel_l2"]) for f in mine["per_frame"]] == \
            [(f["input_bytes"], f["rel_l2"]) for f in theirs["per_frame"]]
        # The whole container, as encode writes it: in memory here, from the files for the CLI.
        assert mine["output_bytes"] == len(gradcodec.encode(frames, preset=preset))
        out = tmp_path / f"{preset}.gcz"
        cli("encode", *paths, "-o", out, "--preset", preset)
        assert theirs["output_bytes"] == out.stat().st_size
        assert mine["encode_mbps"] > 0 and mine["runs"] >= 1
    assert rows[0]["lossless"] and rows[0]["rel_l2"] == 0


def test_bench_sweeps_per_tensor_and_errors(steps):
    _, frames = steps
    rows = gradcodec.bench(frames[0], pipelines=["topk(ratio=0.01) | varint"], sweeps=["topk.ratio=0.001,0.1"],
                           repeat=1, min_time=0, per_tensor=True)
    assert [r["sweep"] for r in rows] == ["topk.ratio=0.001", "topk.ratio=0.1"]
    assert rows[0]["kept"] < rows[1]["kept"]
    assert [t["name"] for t in rows[0]["per_tensor"]] == list(frames[0])
    with pytest.raises(gradcodec.UsageError, match="no-such"):
        gradcodec.bench(frames[0], presets=["no-such"])
    with pytest.raises(gradcodec.UsageError, match="STAGE.PARAM"):
        gradcodec.bench(frames[0], presets=["topk-1pct"], sweeps=["topk"])
    with pytest.raises(gradcodec.UsageError, match="min_time"):
        gradcodec.bench(frames[0], min_time=-1)
    with pytest.raises(gradcodec.UsageError):
        gradcodec.bench(frames[0], presets=[3])
    with pytest.raises(gradcodec.InputError):
        gradcodec.bench({"x": np.array([1.0, np.nan], np.float32)}, presets=["topk-1pct"], repeat=1, min_time=0)
    with pytest.raises(gradcodec.UsageError, match="workers"):
        gradcodec.bench(frames[0], presets=["fp16"], link_rate=1e9)


def test_bench_link_model(steps):
    _, frames = steps
    rows = gradcodec.bench(frames, presets=["fp16", "topk-1pct"], repeat=1, min_time=0, link_rate=1.25e9,
                           link_workers=4, link_latency=0)
    assert [r["link_collective"] for r in rows] == ["allreduce", "allgather"]
    for r in rows:
        payload = sum(f["record_bytes"] for f in r["per_frame"]) / len(r["per_frame"])
        sent = 3 * payload if r["link_collective"] == "allgather" else 1.5 * payload
        assert r["link_sent_bytes"] == pytest.approx(sent, rel=1e-12)
        assert r["link_fp32_seconds"] == pytest.approx(1.5 * 4 * r["parameters"] / 2 / 1.25e9, rel=1e-12)


def test_bench_target(steps):
    _, frames = steps
    rows = gradcodec.bench(frames[:1], pipelines=["topk(ratio=0.5)", "fp16"], repeat=1, min_time=0,
                           target="bits=3")
    topk, fp16 = rows
    assert topk["target"]["status"] == "met" and topk["bits_per_param"] <= 3
    assert topk["pipeline"] == f"topk(ratio={topk['target']['value']}) | raw | varint"
    assert fp16["target"]["status"] == "none" and fp16["pipeline"] == "fp16"
    with pytest.raises(gradcodec.UsageError, match="--sweep"):
        gradcodec.bench(frames, pipelines=["topk"], sweeps=["topk.ratio=0.1"], target="bits=3")


def record_bytes(blob, frame):
    """What each record of `frame` adds to a 1.1 container (docs/format.md, "Format 1.1"): its
    streams in the body, its entry in the footer, and the entries of the footer's tensor and layout
    tables it is the first record of."""
    c = container(blob)
    assert c.minor == 1
    seen_t, seen_l, out = set(), set(), []
    for f, (_, _, recs) in enumerate(c.frames):
        for r in recs:
            n = r.size + len(r.entry)
            n += c.tensor_bytes[r.tensor] if r.tensor not in seen_t else 0
            n += c.layout_bytes[r.layout] if r.layout not in seen_l else 0
            seen_t.add(r.tensor)
            seen_l.add(r.layout)
            if f == frame:
                out.append(n)
    return out


def test_encoder_appends_frames_and_reports_sizes(steps):
    _, frames = steps
    with gradcodec.Encoder(preset="topk-1pct", seed=2) as enc:
        sizes = [enc.add(f) for f in frames]
    blob = enc.getvalue()
    assert blob == gradcodec.encode(frames, preset="topk-1pct", seed=2)
    assert [[s["name"] for s in frame] for frame in sizes] == [list(f) for f in frames]
    assert [s["record_bytes"] for s in sizes[1]] == record_bytes(blob, 1)
    assert [s["record_bytes"] for s in sizes[0]] == record_bytes(blob, 0)
    assert enc.summary["frames"] == 2 and enc.summary["output_bytes"] == len(blob)
    assert enc.summary["ratio"] == pytest.approx(enc.summary["input_bytes"] / len(blob))


def test_an_exception_in_the_block_leaves_no_file_and_keeps_the_old_one(tmp_path, steps):
    _, frames = steps
    path = tmp_path / "run.gcz"
    with pytest.raises(RuntimeError):
        with gradcodec.Encoder(path) as enc:
            enc.add(frames[0])
            raise RuntimeError("training diverged")
    assert list(tmp_path.iterdir()) == []
    path.write_bytes(b"the user's file")
    with pytest.raises(RuntimeError):
        with gradcodec.Encoder(path) as enc:
            enc.add(frames[0])
            raise RuntimeError("again")
    assert path.read_bytes() == b"the user's file" and len(list(tmp_path.iterdir())) == 1
    with gradcodec.Encoder(path) as enc:
        enc.add(frames[0])
    assert gradcodec.open(path).tensors(0)[0].name == next(iter(frames[0]))


def test_arrays_of_every_layout_give_the_same_records():
    rng = np.random.default_rng(4)
    base = rng.standard_normal((64, 48)).astype(np.float32)
    ref = records(gradcodec.encode({"w": base}, preset="qsgd4", seed=1))
    strided = np.asfortranarray(base)
    assert not strided.flags.c_contiguous
    assert records(gradcodec.encode({"w": strided}, preset="qsgd4", seed=1)) == ref
    big = base.astype(">f4")
    assert records(gradcodec.encode({"w": big}, preset="qsgd4", seed=1)) == ref
    sliced = np.concatenate([base, base], axis=1)[:, ::2]
    assert records(gradcodec.encode({"w": np.ascontiguousarray(sliced)}, preset="qsgd4", seed=1)) == \
        records(gradcodec.encode({"w": sliced}, preset="qsgd4", seed=1))


def test_every_dtype_comes_back_as_stored():
    frame = {
        "h": np.linspace(-2, 2, 33, dtype=np.float16),
        "s": np.array(1.5, dtype=np.float32),  # 0-d
        "d": np.arange(12, dtype=np.float64).reshape(3, 4) / 7,
        "i": np.arange(6, dtype=np.int64).reshape(2, 3),
        "b": np.array([True, False, True]),
        "c": np.array([1 + 2j, 3 - 4j], dtype=np.complex64),
        "e": np.zeros((0, 5), dtype=np.float32),
    }
    got = gradcodec.decode(gradcodec.encode(frame))
    for name, arr in frame.items():
        assert got[name].dtype == arr.dtype and got[name].shape == arr.shape, name
        assert got[name].tobytes() == arr.tobytes(), name
    infos = {t.name: t for t in gradcodec.open(gradcodec.encode(frame)).tensors()}
    assert infos["s"].shape == () and infos["i"].dtype == np.dtype("<i8")


def test_the_ratio_study_of_the_docs_prints_what_they_show():
    # docs/python.md, "A ratio study": its code block run from the source folder, and its output
    # block (the indented lines after "Output") compared line for line.
    text = (SOURCE / "docs" / "python.md").read_text(encoding="utf-8")
    section = text.split("## A ratio study", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    shown = [l[4:] for l in section.split("\nOutput", 1)[1].splitlines() if l.startswith("    ")]
    p = subprocess.run([sys.executable, "-c", code], cwd=SOURCE, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == shown


def test_big_endian_and_structured_arrays_come_back_with_their_values_and_fields():
    # Big-endian arrays of any dtype are stored little-endian: the same values come back.
    for dt in (">i4", ">u2", ">i8", ">c8", ">f4", ">f8"):
        a = (np.arange(-3, 9) * 3).astype(dt).reshape(3, 4)
        got = gradcodec.decode(gradcodec.encode({"x": a}))["x"]
        assert got.dtype == a.dtype.newbyteorder("<") and np.array_equal(got, a), dt
    # A structured array keeps its fields (the descr a .npy header holds), in open() and in read(),
    # and the CLI writes it back as a .npy numpy reads with the same fields.
    s = np.zeros(5, [("a", "<i4"), ("b", ">f8"), ("c", "<u1", (2,))])
    s["a"], s["b"], s["c"] = np.arange(5), np.linspace(0, 1, 5), 7
    blob = gradcodec.encode({"s": s})
    assert gradcodec.open(blob).tensors()[0].dtype == s.dtype
    got = gradcodec.decode(blob)["s"]
    assert got.dtype == s.dtype and got.tobytes() == s.tobytes()


def test_an_empty_preset_or_pipeline_is_refused_not_taken_as_the_default():
    x = {"x": np.ones(3, np.float32)}
    for kw in ({"preset": ""}, {"pipeline": ""}, {"preset": " "}, {"pipeline": "\t"}):
        with pytest.raises(gradcodec.UsageError, match="is empty"):
            gradcodec.encode(x, **kw)
    for make in (lambda: gradcodec.Compressor(""), lambda: gradcodec.Decompressor(preset=""),
                 lambda: gradcodec.canonical_pipeline(pipeline="")):
        with pytest.raises(gradcodec.UsageError, match="is empty"):
            make()


def test_a_closed_container_refuses_use_with_a_usage_error():
    c = gradcodec.open(gradcodec.encode({"x": np.ones(3, np.float32)}))
    with c:
        assert len(c) == 1
    for use in (lambda: c.read(0), lambda: c.tensors(), lambda: c.pipeline, lambda: len(c)):
        with pytest.raises(gradcodec.UsageError, match="closed") as e:
            use()
        assert e.value.code == 1


def test_errors_carry_the_clis_exit_codes(steps):
    _, frames = steps
    w = next(iter(frames[0].values()))
    cases = [
        (lambda: gradcodec.encode({"w": w}, pipeline="topk(ratio=2)"), gradcodec.UsageError, 1),
        (lambda: gradcodec.encode({"w": w}, preset="no-such-preset"), gradcodec.UsageError, 1),
        (lambda: gradcodec.encode({"w": w}, preset="fp16", pipeline="fp16"), gradcodec.UsageError, 1),
        (lambda: gradcodec.encode({"w": w}, seed=-1), gradcodec.UsageError, 1),
        (lambda: gradcodec.encode([{"w": w}, "x"]), gradcodec.UsageError, 1),
        (lambda: gradcodec.encode({"w": w}, nonfinite="zero"), gradcodec.UsageError, 1),
        (lambda: gradcodec.encode({"o": np.array([object()])}), gradcodec.InputError, 2),
        (lambda: gradcodec.encode({"w": np.array([1.0, np.nan], np.float32)}, preset="qsgd4"), gradcodec.InputError, 2),
        (lambda: gradcodec.decode(b"not a container at all, just bytes" * 4), gradcodec.CorruptError, 3),
    ]
    for call, cls, code in cases:
        with pytest.raises(cls) as e:
            call()
        assert e.value.code == code and isinstance(e.value, gradcodec.Error), e.value
        assert str(e.value)


def test_errors_about_bytes_inputs_name_them_not_a_temporary_file(tmp_path, steps):
    _, frames = steps
    good = gradcodec.encode(frames[0], preset="ssdm")
    blob = bytearray(good)
    blob[len(blob) // 2] ^= 0xFF
    with pytest.raises(gradcodec.CorruptError) as e:
        gradcodec.inspect(bytes(blob))
    assert "<bytes>" in str(e.value) and "gradcodec-" not in str(e.value)
    with pytest.raises(gradcodec.CorruptError) as e:
        gradcodec.merge([good, bytes(blob)], method="marsit")
    assert "<bytes #1>" in str(e.value) and "gradcodec-" not in str(e.value)


def test_a_damaged_container_is_corrupt_and_a_snapshot_is_not_a_container(steps):
    paths, frames = steps
    blob = bytearray(gradcodec.encode(frames[0], preset="qsgd4", seed=1))
    rec = container(bytes(blob)).records(0)[5]
    assert rec.size >= 3
    at = rec.offset + rec.size - 3  # inside the record's streams
    blob[at] ^= 0x40
    with pytest.raises(gradcodec.CorruptError) as e:
        gradcodec.decode(bytes(blob))
    assert e.value.code == 3 and "checksum" in str(e.value)
    with pytest.raises(gradcodec.InputError) as e:
        gradcodec.open(paths[0])
    assert e.value.code == 2 and "npz" in str(e.value).lower()


def test_nonfinite_refusals_name_the_python_keyword_not_the_cli_flag():
    x = np.array([1.0, np.nan, 2.0] * 50, np.float32)
    calls = [
        lambda: gradcodec.encode({"x": x}, preset="qsgd4"),
        lambda: gradcodec.Compressor(preset="qsgd4").roundtrip("x", x),
        lambda: gradcodec.bench({"x": x}, presets=["qsgd4"], repeat=1, min_time=0),
    ]
    for call in calls:
        with pytest.raises(gradcodec.InputError) as e:
            call()
        assert str(e.value).endswith('nonfinite="raw" stores such tensors raw'), e.value
        assert "--nonfinite" not in str(e.value), e.value


def test_merge_refusal_names_the_python_keywords():
    big = {"w": (np.random.default_rng(0).standard_normal((50, 10)) * 1e5).astype(np.float32)}
    a = gradcodec.encode(big, preset="lossless")
    with pytest.raises(gradcodec.InputError) as e:
        gradcodec.merge([a, a], method="mean", preset="fp16")
    assert str(e.value).endswith('merge stores no tensor raw; method="mean", preset="lossless" keeps such values'), e.value
    assert "--preset" not in str(e.value), e.value


def test_nonfinite_values_are_stored_raw_when_asked():
    x = np.array([1.0, np.inf, -np.inf, np.nan, 2.0] * 50, np.float32)
    got = gradcodec.decode(gradcodec.encode({"x": x}, preset="qsgd4", nonfinite="raw"))["x"]
    assert got.tobytes() == x.tobytes()


def test_thread_count_does_not_change_the_bytes(steps):
    _, frames = steps
    one = gradcodec.encode(frames, preset="bird+", seed=9, threads=1)
    assert gradcodec.encode(frames, preset="bird+", seed=9, threads=3) == one
    assert gradcodec.decode(one, 1, threads=3).keys() == frames[1].keys()


@pytest.mark.parametrize("preset", ["topk-1pct", "qsgd4", "powersgd-r2", "ef-signsgd", "tcs"])
def test_compressor_gives_what_a_receiver_decodes(tmp_path, steps, preset):
    _, frames = steps
    comp = gradcodec.Compressor(preset, seed=5)
    assert comp.pipeline == gradcodec.canonical_pipeline(preset=preset)
    # A Compressor's record is a 1.0 tensor record (TREC) on its own, by design: its size is
    # that of the record in a 1.0 container of the same frames, which the CLI writes with
    # --format-version 1.0 (gradcodec.encode writes 1.1 only); its decoded tensors are those of
    # gradcodec.encode's 1.1 container.
    def sizes_10(frame_list):
        files = []
        for f, frame in enumerate(frame_list):
            files.append(tmp_path / f"f{f}.npz")
            np.savez(files[-1], **frame)
        out = tmp_path / "v10.gcz"
        cli("encode", *files, "-o", out, "--preset", preset, "--seed", 5, "--format-version", "1.0", "--force")
        c = container(out.read_bytes())
        assert c.minor == 0 and records(out.read_bytes()) == \
            [[(k, None) for k, _ in f] for f in records(gradcodec.encode(frame_list, preset=preset, seed=5))]
        return [[r.size for r in recs] for _, _, recs in c.frames]

    if comp.solo_frames:  # a reducer planning whole frames: each call is a frame of its own
        name = "cnn.conv2.weight"
        blob = gradcodec.encode([{name: f[name]} for f in frames], preset=preset, seed=5)
        sizes = [r[0] for r in sizes_10([{name: f[name]} for f in frames])]
        for f, frame in enumerate(frames):
            got = comp.roundtrip(name, frame[name])
            assert got.tobytes() == gradcodec.decode(blob, f)[name].tobytes()
            assert comp.last_bytes == sizes[f]
        return
    blob = gradcodec.encode(frames, preset=preset, seed=5)
    sizes = sizes_10(frames)
    for f, frame in enumerate(frames):
        want = gradcodec.decode(blob, f)
        for i, (name, arr) in enumerate(frame.items()):
            got = comp.roundtrip(name, arr)
            assert got.dtype == arr.dtype and got.shape == arr.shape
            assert got.tobytes() == want[name].tobytes(), (f, name)
            assert comp.last_bytes == sizes[f][i]
    assert comp.calls(next(iter(frames[0]))) == 2


def test_compressor_takes_a_pipeline_text_and_refuses_bad_ones():
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    comp = gradcodec.Compressor("ef | topk(ratio=0.1)")
    first = comp.roundtrip("x", x)
    assert np.count_nonzero(first) == 100
    # Error feedback: what the first call left out is sent by the second.
    second = comp.roundtrip("x", np.zeros_like(x))
    assert np.count_nonzero(second) == 100 and not np.array_equal(first, second)
    with pytest.raises(gradcodec.UsageError):
        gradcodec.Compressor("topk(ratio=7)")
    with pytest.raises(gradcodec.InputError):
        gradcodec.Compressor("qsgd4").roundtrip("x", np.array([np.nan] * 8, np.float32))


@pytest.mark.parametrize("preset", ["qsgd4", "powersgd-r2", "ef | topk(ratio=0.02)"])
def test_records_sent_to_a_decompressor_decode_to_what_the_sender_kept(steps, preset):
    _, frames = steps
    senders = [gradcodec.Compressor(preset, seed=s) for s in (1, 2)]
    receivers = [gradcodec.Decompressor(preset, seed=s) for s in (1, 2)]
    for frame in frames:
        for name, arr in frame.items():
            for sender, receiver in zip(senders, receivers):
                record, kept = sender.encode(name, arr)
                assert len(record) == sender.last_bytes and record[:4] == b"TREC"
                got = receiver.decode(name, record)
                assert got.dtype == kept.dtype and got.tobytes() == kept.tobytes(), name
    assert receivers[0].calls(next(iter(frames[0]))) == 2


def test_a_damaged_record_is_refused_and_changes_nothing():
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(4096).astype(np.float32) for _ in range(3)]
    sender, receiver = gradcodec.Compressor("powersgd-r2", seed=3), gradcodec.Decompressor("powersgd-r2", seed=3)
    first, _ = sender.encode("w", xs[0].reshape(64, 64))
    receiver.decode("w", first)
    second, kept = sender.encode("w", xs[1].reshape(64, 64))
    for bad in (second[:-1], second + b"\0", second[:len(second) // 2] + bytes([second[len(second) // 2] ^ 1]) +
                second[len(second) // 2 + 1:]):
        with pytest.raises(gradcodec.CorruptError) as e:
            receiver.decode("w", bad)
        assert e.value.code == 3
    with pytest.raises(gradcodec.CorruptError):
        receiver.decode("v", second)  # a record of another name
    assert receiver.decode("w", second).tobytes() == kept.tobytes()
