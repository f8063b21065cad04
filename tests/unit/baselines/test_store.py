import json
import os

import pytest

from pytest_llmperf.baselines.store import (
    BaselineError,
    BaselineStore,
    sanitize_name,
    stable_float,
    workload_key,
)
from pytest_llmperf.util.secrets import strip_secrets

SERVER = "qwen3.6-35b-a3b-fp8-mtp"
WORKLOAD = {
    "dataset": "ShareGPT_V3_unfiltered_cleaned_split.json",
    "dataset_sha256": "ab12",
    "seed": 0,
    "num_prompts": 500,
    "max_tokens": 256,
    "max_seconds": 300,
}
PROV = {
    "plugin_version": "0.1.0",
    "vllm_version": "0.32.0",
    "gpu_name": "NVIDIA H200",
    "gpu_count": 1,
    "date": "2026-06-22T19:42:00+08:00",
    "git_commit": "deadbeef",
}


@pytest.fixture
def store(tmp_path):
    return BaselineStore(tmp_path / "baselines")


def record(store, concurrency=32, metrics=None, workload=WORKLOAD, provenance=PROV, target="NVIDIA H200"):
    metrics = metrics if metrics is not None else {"decode_tok_s": [407.9, 401.2, 410.3], "acceptance_rate": 0.67}
    return store.record(target, SERVER, concurrency, metrics, workload, provenance)


# --- names and numbers -----------------------------------------------------------


@pytest.mark.parametrize(
    "raw, safe",
    [
        ("NVIDIA H200", "NVIDIA-H200"),
        ("sim", "sim"),
        ("Qwen/Qwen3.6-27B-FP8", "Qwen-Qwen3.6-27B-FP8"),
        ("NVIDIA  H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
        ("../../etc", "etc"),
    ],
)
def test_sanitize_name(raw, safe):
    assert sanitize_name(raw) == safe


@pytest.mark.parametrize("bad", ["", "..", "///", "  "])
def test_sanitize_name_rejects_empty_results(bad):
    with pytest.raises(ValueError, match="not usable as a file name"):
        sanitize_name(bad)


def test_path_for(store):
    assert store.path_for("NVIDIA H200", SERVER) == store.root / "NVIDIA-H200" / f"{SERVER}.json"
    with pytest.raises(ValueError, match="reserved"):
        store.path_for("published", SERVER)


def test_stable_float():
    assert stable_float(407.91234567) == 407.912
    assert stable_float(-0.0) == 0.0 and str(stable_float(-0.0)) == "0.0"
    with pytest.raises(ValueError):
        stable_float(float("nan"))


# --- round trip and format ---------------------------------------------------------


def test_missing_file_loads_as_none(store):
    assert store.load("sim", SERVER) is None


def test_round_trip(store):
    record(store)
    f = store.load("NVIDIA H200", SERVER)
    assert f.target == "NVIDIA-H200" and f.server == SERVER
    m = f.metric(32, "decode_tok_s")
    assert m["value"] == 407.9  # median of the three samples
    assert m["samples"] == [407.9, 401.2, 410.3]
    assert m["spread"] == pytest.approx((410.3 - 401.2) / 407.9, rel=1e-5)
    assert m["direction"] == "higher"
    assert f.value(32, "acceptance_rate") == 0.67
    assert f.metric(32, "acceptance_rate")["samples"] == [0.67]
    assert f.entry(32)["workload"] == WORKLOAD
    assert f.entry(32)["provenance"] == PROV
    assert f.entry(8) is None and f.value(8, "decode_tok_s") is None


def test_file_is_sorted_indented_and_ends_with_newline(store):
    record(store, concurrency=32)
    record(store, concurrency=8)
    record(store, concurrency=1)
    text = store.path_for("NVIDIA H200", SERVER).read_text()
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text.startswith('{\n  "concurrency": {\n    "1": {')
    # concurrency in numeric order, not string order
    assert text.index('"1": {') < text.index('"8": {') < text.index('"32": {')
    doc = json.loads(text)
    assert list(doc) == sorted(doc)
    assert list(doc["concurrency"]["8"]) == [workload_key(WORKLOAD)]
    assert list(doc["concurrency"]["8"][workload_key(WORKLOAD)]["metrics"]) == ["acceptance_rate", "decode_tok_s"]


def test_rewriting_the_same_data_is_byte_identical(store, tmp_path):
    record(store, concurrency=8)
    record(store, concurrency=32)
    path = store.path_for("NVIDIA H200", SERVER)
    first = path.read_bytes()
    record(store, concurrency=32)
    assert path.read_bytes() == first
    # and a second store fed the same data in another order writes the same bytes
    other = BaselineStore(tmp_path / "other")
    reordered = {"acceptance_rate": 0.67, "decode_tok_s": [407.9, 401.2, 410.3]}
    record(other, concurrency=32, metrics=reordered, workload=dict(reversed(list(WORKLOAD.items()))))
    record(other, concurrency=8, metrics=reordered)
    assert other.path_for("NVIDIA H200", SERVER).read_bytes() == first


def test_numbers_are_rounded_to_stable_digits(store):
    record(store, metrics={"decode_tok_s": [407.912345678]})
    text = store.path_for("NVIDIA H200", SERVER).read_text()
    assert "407.912" in text and "407.9123" not in text


def test_merge_keeps_other_concurrencies(store):
    record(store, concurrency=8, metrics={"decode_tok_s": [97.96]})
    record(store, concurrency=32, metrics={"decode_tok_s": [407.9]})
    f = store.load("NVIDIA H200", SERVER)
    assert sorted(f.entries) == [8, 32]
    assert f.value(8, "decode_tok_s") == 97.96


def test_same_workload_merges_metrics_within_a_concurrency(store):
    record(store, metrics={"decode_tok_s": [407.9], "acceptance_rate": [0.67]})
    record(store, metrics={"mtp_speedup": [1.426], "acceptance_rate": [0.68]})
    f = store.load("NVIDIA H200", SERVER)
    assert f.value(32, "decode_tok_s") == 407.9  # kept
    assert f.value(32, "mtp_speedup") == 1.426  # added
    assert f.value(32, "acceptance_rate") == 0.68  # replaced


def test_another_workload_gets_its_own_entry_beside(store):
    record(store, metrics={"decode_tok_s": [407.9], "acceptance_rate": [0.67]})
    short = dict(WORKLOAD, max_tokens=128)
    record(store, metrics={"decode_tok_s": [300.0]}, workload=short)
    f = store.load("NVIDIA H200", SERVER)
    assert set(f.entries[32]) == {workload_key(WORKLOAD), workload_key(short)}
    assert f.value(32, "decode_tok_s", WORKLOAD) == 407.9 and f.value(32, "acceptance_rate", WORKLOAD) == 0.67
    assert f.value(32, "decode_tok_s", short) == 300.0 and f.metric(32, "acceptance_rate", short) is None
    assert f.others(32, WORKLOAD) == [f.entry(32, short)]
    with pytest.raises(ValueError, match="concurrency 32 has 2 entries, one per workload; name the workload"):
        f.entry(32)


def test_the_same_workload_elsewhere_replaces_its_entry(store):
    """A dataset, model, clock or hardware change is no new workload: the entry is replaced."""
    record(store, metrics={"decode_tok_s": [407.9], "acceptance_rate": [0.67]})
    record(store, metrics={"decode_tok_s": [300.0]}, workload=dict(WORKLOAD, dataset="other.json"))
    record(store, metrics={"decode_tok_s": [200.0]}, provenance=dict(PROV, gpu_count=2))
    (entry,) = store.load("NVIDIA H200", SERVER).entries[32].values()
    assert set(entry["metrics"]) == {"decode_tok_s"}  # stale acceptance from the old setup dropped
    assert entry["metrics"]["decode_tok_s"]["value"] == 200.0 and entry["provenance"]["gpu_count"] == 2


def test_the_workload_key_is_what_was_asked_for_sorted_and_spelled_one_way():
    workload = {
        "concurrency": 8,
        "model": "org/m",
        "dataset": "d.json sha256:ab",
        "clock_speed": 10.0,
        "num_prompts": 16,
        "max_seconds": 60.0,
        "max_tokens": 256,
        "warmup": 2,
        "endpoint": "completions",
        "seed": 0,
        "ignore_eos": False,
        "profile": "smoke",
    }
    key = (
        "endpoint=completions ignore_eos=false max_seconds=60 max_tokens=256 num_prompts=16 "
        "profile=smoke seed=0 warmup=2"
    )
    assert workload_key(workload) == key
    assert workload_key(dict(workload, max_seconds=60, clock_speed=1.0, dataset="x")) == key  # 60 and 60.0 alike
    assert workload_key(dict(workload, max_seconds=None)) == key.replace("max_seconds=60", "max_seconds=null")
    assert workload_key(dict(workload, max_seconds=0.5)).count("max_seconds=0.5 ") == 1
    assert workload_key({"seed": 123456789}) == "seed=123456789"
    assert workload_key({}) == "default"


def test_a_format_1_file_loads_keyed_by_each_entrys_workload(store):
    record(store, concurrency=8)
    record(store, concurrency=32, workload=dict(WORKLOAD, num_prompts=1000))
    path = store.path_for("NVIDIA H200", SERVER)
    doc = json.loads(path.read_text())
    old = {**doc, "format": 1, "concurrency": {c: next(iter(at.values())) for c, at in doc["concurrency"].items()}}
    path.write_text(json.dumps(old))
    f = store.load("NVIDIA H200", SERVER)
    assert list(f.entries[8]) == [workload_key(WORKLOAD)]
    assert f.value(32, "decode_tok_s", dict(WORKLOAD, num_prompts=1000)) == 407.9
    assert f.entry(32, WORKLOAD) is None
    assert json.loads(f.to_json()) == doc  # rewritten as format 2, nothing else changes


def test_none_samples_are_skipped(store):
    record(store, metrics={"decode_tok_s": [400.0, None, 402.0], "acceptance_rate": None})
    f = store.load("NVIDIA H200", SERVER)
    assert f.metric(32, "decode_tok_s")["samples"] == [400.0, 402.0]
    assert f.metric(32, "acceptance_rate") is None


def test_record_validates_inputs(store):
    with pytest.raises(ValueError, match="concurrency must be a positive integer"):
        record(store, concurrency=0)
    with pytest.raises(ValueError, match="metric decode_tok_s"):
        record(store, metrics={"decode_tok_s": [float("inf")]})
    with pytest.raises(ValueError, match="unknown metric 'decode_tok_sx'; did you mean decode_tok_s"):
        record(store, metrics={"decode_tok_sx": [1.0]})
    with pytest.raises(ValueError, match="workload.when"):
        record(store, workload={"when": object()})
    assert not store.path_for("NVIDIA H200", SERVER).exists()  # nothing half-written


def test_a_baseline_naming_an_unknown_metric_is_refused(store):
    path = record(store).path
    path.write_text(path.read_text().replace('"decode_tok_s"', '"decode_toks"'))
    with pytest.raises(BaselineError, match="unknown metric 'decode_toks'; did you mean decode_tok_s"):
        store.load("NVIDIA H200", SERVER)


def test_numpy_scalars_are_stored_as_plain_numbers(store):
    np = pytest.importorskip("numpy")
    record(
        store,
        metrics={"decode_tok_s": [np.float64(400.5), np.float32(401.5)], "completed": [np.int64(118)]},
        workload=dict(WORKLOAD, num_prompts=np.int64(500)),
    )
    f = store.load("NVIDIA H200", SERVER)
    assert f.value(32, "decode_tok_s") == 401.0
    assert f.value(32, "completed") == 118.0
    assert f.entry(32)["workload"]["num_prompts"] == 500


def test_concurrent_records_of_different_concurrencies_all_survive(store):
    import threading

    levels = [1, 2, 4, 8, 16, 32]
    threads = [threading.Thread(target=record, args=(store, c, {"decode_tok_s": [float(c)]})) for c in levels]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    f = store.load("NVIDIA H200", SERVER)
    assert sorted(f.entries) == levels
    assert [p.name for p in f.path.parent.iterdir()] == [f.path.name]  # no lock or temp files left


# --- atomic writes ---------------------------------------------------------------


def test_failed_write_leaves_the_old_file_and_no_temp_files(store, monkeypatch):
    record(store, concurrency=8)
    path = store.path_for("NVIDIA H200", SERVER)
    before = path.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        record(store, concurrency=32)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_failure_mid_write_leaves_no_partial_file(store, monkeypatch):
    path = store.path_for("NVIDIA H200", SERVER)
    real_fsync = os.fsync

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        record(store)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert not path.exists()
    assert list(path.parent.iterdir()) == []


# --- secrets ---------------------------------------------------------------------


def test_provenance_secrets_are_stripped(store):
    prov = dict(
        PROV,
        hf_token="hf_" + "a" * 30,
        HF_TOKEN="***",
        api_key="x1",
        max_tokens=256,
        tokenizer="Qwen/Qwen3.6",
        note="Bearer abcdefghijklmnop",
        env={"HUGGING_FACE_HUB_TOKEN": "zzz", "VLLM_USE_V1": "1"},
        args=["--model", "m", "sk-" + "b" * 20],
    )
    record(store, provenance=prov)
    text = store.path_for("NVIDIA H200", SERVER).read_text()
    for leaked in ("hf_aaaa", "x1", "Bearer", "zzz", "sk-bbbb"):
        assert leaked not in text
    p = store.load("NVIDIA H200", SERVER).entry(32)["provenance"]
    assert p["max_tokens"] == 256 and p["tokenizer"] == "Qwen/Qwen3.6"  # not secrets
    assert p["HF_TOKEN"] == "***"  # redaction marker kept
    assert p["env"] == {"VLLM_USE_V1": "1"}
    assert p["args"] == ["--model", "m", "***"]


def test_strip_secrets_on_plain_values():
    assert strip_secrets({"password": "p", "a": 1}) == {"a": 1}
    assert strip_secrets({"cmd": "run HF_TOKEN=abc123"}) == {}
    assert strip_secrets({"cmd": "run HF_TOKEN=***"}) == {"cmd": "run HF_TOKEN=***"}


# --- corrupt and hand-edited files -------------------------------------------------


def write_raw(store, text, target="sim"):
    path = store.path_for(target, SERVER)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def good_doc(store):
    record(store, target="sim")
    return json.loads(store.path_for("sim", SERVER).read_text())


def expect_error(store, doc_or_text, match):
    text = doc_or_text if isinstance(doc_or_text, str) else json.dumps(doc_or_text)
    path = write_raw(store, text)
    with pytest.raises(BaselineError) as exc:
        store.load("sim", SERVER)
    assert str(path) in str(exc.value)
    assert exc.value.path == path
    assert match in str(exc.value), str(exc.value)


def test_truncated_json_names_the_file_and_position(store):
    good = json.dumps(good_doc(store), indent=2)
    expect_error(store, good[: len(good) // 2], "not valid JSON (line")


def test_empty_file(store):
    expect_error(store, "", "empty file")


def test_nan_is_refused(store):
    expect_error(store, '{"format": 1, "x": NaN}', "NaN")


def only(doc, level="32"):
    """The one entry of a good_doc at `level`."""
    (entry,) = doc["concurrency"][level].values()
    return entry


AT = f"concurrency[32][{workload_key(WORKLOAD)!r}]"


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d.update(format=3), "unsupported format 3 (this plugin reads format 1 or 2)"),
        (lambda d: d.update(format=True), "unsupported format True"),
        (lambda d: d.update(server="other"), "'server' is 'other'"),
        (lambda d: d.pop("concurrency"), "'concurrency' section"),
        (lambda d: d["concurrency"].update({"eight": d["concurrency"]["32"]}), "'eight' is not a positive integer"),
        (lambda d: d["concurrency"].update({"32": {}}), "concurrency[32]: expected an object of entries by workload"),
        (lambda d: d["concurrency"].update({"32": only(d)}), "concurrency[32]['metrics']: missing or invalid"),
        (lambda d: only(d).pop("workload"), f"{AT}: missing or invalid 'workload'"),
        (
            lambda d: only(d)["workload"].update(max_tokens=128),
            f"{AT}: the key does not match the entry's workload, whose key is "
            f"{workload_key(dict(WORKLOAD, max_tokens=128))!r}; rename the key",
        ),
        (
            lambda d: only(d)["metrics"]["decode_tok_s"].update(value="fast"),
            f"{AT}.metrics.decode_tok_s.value must be a finite number",
        ),
        (lambda d: only(d)["metrics"]["decode_tok_s"].update(samples=[]), "samples must be a non-empty list"),
        (lambda d: only(d)["metrics"]["decode_tok_s"].pop("direction"), "missing 'direction'"),
        (lambda d: only(d)["metrics"]["decode_tok_s"].update(direction="lower"), "decode_tok_s is higher-is-better"),
        (
            lambda d: only(d)["metrics"]["decode_tok_s"].update(value=300.0),
            "decode_tok_s.value 300.0 is not the median of its nights' values (407.9)",
        ),
        (
            lambda d: (
                only(d)["metrics"]["decode_tok_s"].pop("nights")
                and only(d)["metrics"]["decode_tok_s"].update(value=300.0)
            ),
            "decode_tok_s.value 300.0 is not the median of its samples (407.9)",
        ),
        (
            lambda d: only(d)["metrics"]["decode_tok_s"]["nights"][0].update(value=300.0),
            "decode_tok_s.nights[-1].value 300.0 is not the median of its samples (407.9)",
        ),
        (lambda d: only(d)["metrics"]["decode_tok_s"].update(nights=[]), "nights must be a non-empty list"),
        (lambda d: only(d)["metrics"]["decode_tok_s"].update(spread=-1), "spread must be a number >= 0"),
        (
            lambda d: only(d)["metrics"]["decode_tok_s"].update(tolerance="3%"),
            f"{AT}.metrics.decode_tok_s: unknown key(s) 'tolerance'",
        ),
        (lambda d: only(d).update(notes="x"), f"{AT}: unknown key(s) 'notes'"),
        (lambda d: d.update(extra=1), "top level: unknown key(s) 'extra'"),
    ],
)
def test_hand_edited_files_are_refused_with_what_is_wrong(store, mutate, match):
    doc = good_doc(store)
    mutate(doc)
    expect_error(store, doc, match)


def test_unreadable_path_is_a_baseline_error(store):
    store.path_for("sim", SERVER).mkdir(parents=True)  # a directory where the file should be
    with pytest.raises(BaselineError, match="cannot be read"):
        store.load("sim", SERVER)


def test_record_refuses_to_overwrite_a_corrupt_file(store):
    path = write_raw(store, '{"format": 1, "concurrency": {')
    with pytest.raises(BaselineError, match="fix or delete the file"):
        record(store, target="sim")
    assert path.read_text() == '{"format": 1, "concurrency": {'


def test_top_level_not_an_object(store):
    expect_error(store, "[1, 2]", "expected a JSON object")


# --- published reference figures --------------------------------------------------


def test_published_figures_round_trip_apart_from_baselines(store):
    source = "seeds/qwen36-35b-a3b-fp8-mtp-conc32.txt"
    store.write_published(
        SERVER, 32, {"decode_tok_s": 407.9, "prefill_tok_s": 420.1, "acceptance_rate": 0.67}, source=source
    )
    pub = store.load_published(SERVER)
    assert pub.figures(32) == {"decode_tok_s": 407.9, "prefill_tok_s": 420.1, "acceptance_rate": 0.67}
    assert pub.figures(8) == {}
    assert pub.entries[32]["source"] == source
    assert store.published_path_for(SERVER) == store.root / "published" / f"{SERVER}.json"
    assert "report-only" in store.published_path_for(SERVER).read_text()
    # recording baselines does not touch them
    record(store)
    assert store.load_published(SERVER).figures(32)["decode_tok_s"] == 407.9
    assert store.load_published("nobody") is None


def test_published_needs_a_source_and_valid_figures(store):
    with pytest.raises(ValueError, match="source"):
        store.write_published(SERVER, 32, {"decode_tok_s": 407.9}, source=" ")
    path = store.published_path_for(SERVER)
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "format": 1,
                "kind": "published-reference",
                "server": SERVER,
                "concurrency": {"32": {"figures": {"decode_tok_s": "408"}, "source": "x"}},
            }
        )
    )
    with pytest.raises(BaselineError, match="figures.decode_tok_s must be a finite number"):
        store.load_published(SERVER)


def test_request_lines_are_stored_kept_on_merge_and_validated(store):
    lines = ["0 20 256 86 412.5 17030.2", "1 30 256 90 400 17000"]
    store.record("sim", "s", 8, {"decode_tok_s": [100.0]}, {"w": 1}, {}, requests=lines)
    store.record("sim", "s", 8, {"mtp_speedup": [1.5]}, {"w": 1}, {})  # same workload: kept
    entry = store.load("sim", "s").entry(8)
    assert entry["requests"] == lines and set(entry["metrics"]) == {"decode_tok_s", "mtp_speedup"}
    path = store.path_for("sim", "s")
    doc = json.loads(path.read_text())
    only(doc, "8")["requests"] = ["0 20 256"]
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineError, match=r"concurrency\[8\]\['w=1'\]\.requests: request row 0"):
        store.load("sim", "s")


def nights_of(store, name="decode_tok_s"):
    return store.load("NVIDIA H200", SERVER).metric(32, name, WORKLOAD)


def test_a_metric_level_is_the_median_of_its_last_recording_nights_of_one_build(store):
    for session, value in (("a", 400.0), ("b", 410.0), ("c", 420.0), ("d", 380.0)):
        store.record("NVIDIA H200", SERVER, 32, {"decode_tok_s": [value]}, WORKLOAD, PROV, session=session, nights=3)
    m = nights_of(store)
    assert [n["session"] for n in m["nights"]] == ["b", "c", "d"]  # the last three
    assert m["value"] == 410.0 and m["samples"] == [380.0]  # the median of nights, the last night's samples
    assert store.load("NVIDIA H200", SERVER).entry(32, WORKLOAD) is not None  # the file validates


def test_one_session_counts_once_and_another_build_or_nights_1_starts_afresh(store):
    def put(value, session, provenance=PROV, nights=3):
        metrics = {"decode_tok_s": [value]}
        store.record("NVIDIA H200", SERVER, 32, metrics, WORKLOAD, provenance, session=session, nights=nights)

    put(400.0, "a")
    put(410.0, "b")
    put(430.0, "b")  # the same session again: its value replaced, not a third night
    assert [(n["session"], n["value"]) for n in nights_of(store)["nights"]] == [("a", 400.0), ("b", 430.0)]
    put(500.0, "c", provenance={**PROV, "vllm_version": "0.33.0"})  # a new build: a new level
    assert nights_of(store)["nights"] == [{"session": "c", "value": 500.0}] and nights_of(store)["value"] == 500.0
    put(510.0, "d", provenance={**PROV, "vllm_version": "0.33.0"}, nights=1)
    assert nights_of(store)["nights"] == [{"session": "d", "value": 510.0}]


def test_an_entry_recorded_before_nights_were_kept_counts_as_one_night(store):
    record(store)
    path = store.path_for("NVIDIA H200", SERVER)
    doc = json.loads(path.read_text())
    for m in only(doc)["metrics"].values():
        m.pop("nights")
    path.write_text(json.dumps(doc))
    store.record("NVIDIA H200", SERVER, 32, {"decode_tok_s": [420.0]}, WORKLOAD, PROV, session="b", nights=3)
    m = nights_of(store)
    assert [n["value"] for n in m["nights"]] == [407.9, 420.0] and m["value"] == 413.95


def test_files_without_request_lines_still_load(store):
    store.record("sim", "s", 8, {"decode_tok_s": [100.0]}, {"w": 1}, {})
    assert "requests" not in store.load("sim", "s").entry(8)


# --- the committed files and their migration --------------------------------------

REPO = __import__("pathlib").Path(__file__).resolve().parents[3]


def test_the_committed_baselines_load_and_are_written_in_the_current_format():
    store = BaselineStore(REPO / "baselines")
    files = [p for p in sorted((REPO / "baselines").glob("*/*.json")) if p.parent.name != "published"]
    assert files
    for path in files:
        baseline = store.load(path.parent.name, path.stem)
        assert baseline.to_json() == path.read_text(), f"{path}: run scripts/migrate_baselines.py"


def test_the_migration_script_rewrites_format_1_files_once_and_keeps_their_figures(store):
    import subprocess
    import sys

    record(store, concurrency=8)
    path = store.path_for("NVIDIA H200", SERVER)
    current = path.read_text()
    doc = json.loads(current)
    path.write_text(json.dumps({**doc, "format": 1, "concurrency": {"8": only(doc, "8")}}))
    script = [sys.executable, str(REPO / "scripts" / "migrate_baselines.py"), str(store.root)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(script, capture_output=True, text=True, env=env, check=True)
    assert out.stdout == f"rewrote {path}\n"
    assert path.read_text() == current
    assert subprocess.run(script, capture_output=True, text=True, env=env, check=True).stdout == ""  # nothing left


# --- writes at the end ------------------------------------------------------------


def test_deferred_records_are_read_before_the_flush_and_written_by_it(tmp_path):
    deferred = BaselineStore(tmp_path / "baselines", deferred=True)
    record(deferred, metrics={"decode_tok_s": [407.9]})
    record(deferred, metrics={"mtp_speedup": [1.426]})
    path = deferred.path_for("NVIDIA H200", SERVER)
    assert not path.exists() and deferred.pending_entries() == 2
    queued = deferred.load("NVIDIA H200", SERVER)
    assert (queued.value(32, "decode_tok_s"), queued.value(32, "mtp_speedup")) == (407.9, 1.426)
    assert [server for server, _, _ in deferred.entries_at("NVIDIA H200", 32)] == [SERVER]

    written, problems = deferred.flush()
    assert (written, problems, deferred.pending_entries()) == ([path], [], 0)
    on_disk = BaselineStore(tmp_path / "baselines").load("NVIDIA H200", SERVER)
    assert (on_disk.value(32, "decode_tok_s"), on_disk.value(32, "mtp_speedup")) == (407.9, 1.426)


def test_the_flush_reads_the_file_again_so_another_writers_entries_survive(tmp_path):
    deferred = BaselineStore(tmp_path / "baselines", deferred=True)
    record(deferred, concurrency=8, metrics={"decode_tok_s": [97.96]})
    record(BaselineStore(tmp_path / "baselines"), concurrency=32, metrics={"decode_tok_s": [407.9]})  # another worker
    deferred.flush()
    f = BaselineStore(tmp_path / "baselines").load("NVIDIA H200", SERVER)
    assert sorted(f.entries) == [8, 32]


def test_a_file_that_cannot_be_written_at_the_flush_is_named_and_the_others_are_written(tmp_path):
    deferred = BaselineStore(tmp_path / "baselines", deferred=True)
    record(deferred, target="sim")
    record(deferred, target="NVIDIA H200")
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "sim").write_text("a file where the folder should be")
    written, problems = deferred.flush()
    assert written == [deferred.path_for("NVIDIA H200", SERVER)]
    assert len(problems) == 1 and "sim" in problems[0] and "not written" in problems[0]


def test_an_unreadable_file_is_refused_when_recorded_not_at_the_flush(tmp_path):
    deferred = BaselineStore(tmp_path / "baselines", deferred=True)
    path = deferred.path_for("NVIDIA H200", SERVER)
    path.parent.mkdir(parents=True)
    path.write_text("{ hand edited")
    with pytest.raises(BaselineError, match="fix or delete the file, then record again"):
        record(deferred)
    assert deferred.pending_entries() == 0 and path.read_text() == "{ hand edited"


def test_unused_entries_are_listed_and_pruned_and_an_empty_file_goes(store):
    short = dict(WORKLOAD, max_tokens=128)
    record(store, concurrency=8)
    record(store, concurrency=32)
    record(store, concurrency=32, workload=short)
    asked = {(32, workload_key(WORKLOAD))}
    assert store.unused("NVIDIA H200", SERVER, asked) == [(8, workload_key(WORKLOAD)), (32, workload_key(short))]
    assert store.prune("NVIDIA H200", SERVER, store.unused("NVIDIA H200", SERVER, asked)) == 2
    assert store.unused("NVIDIA H200", SERVER, asked) == []
    assert list(store.load("NVIDIA H200", SERVER).entries) == [32]
    assert store.prune("NVIDIA H200", SERVER, [(32, workload_key(WORKLOAD))]) == 1
    assert not store.path_for("NVIDIA H200", SERVER).exists()
