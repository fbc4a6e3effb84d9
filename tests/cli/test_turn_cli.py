"""CLI surface of the turn engine: turn, tick, run, debug, agent model."""

from __future__ import annotations

import json
from pathlib import Path

import yaml


def script(tmp_path: Path, steps: list[dict], name: str = "s.yaml") -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"steps": steps}))
    return f"scripted:{p}"


def j(res) -> dict:  # type: ignore[no-untyped-def]
    return json.loads(res.stdout)


def test_turn_nothing_queued_exit_0(script_runner, tmp_path: Path) -> None:
    res = script_runner.run(
        ["holon", "turn", "--model", script(tmp_path, [{"text": "x"}]), "--json"]
    )
    assert res.returncode == 0 and j(res)["data"]["ran"] is False


def test_turn_json_and_status_tokens(script_runner, tmp_path: Path) -> None:
    model = script(tmp_path, [{"text": "hello", "usage": {"input_tokens": 7, "output_tokens": 2}}])
    script_runner.run(["holon", "enqueue", "hi"], check=True)
    res = script_runner.run(["holon", "turn", "--model", model, "--json"])
    assert res.returncode == 0, res.stderr
    d = j(res)["data"]
    assert d["final_text"] == "hello" and d["token_usage"]["total_tokens"] == 9
    st = j(script_runner.run(["holon", "status", "--json"]))["data"]
    assert st["token_usage"]["total"] == {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9}
    assert st["token_usage"]["last_turn"]["total_tokens"] == 9
    assert st["token_usage"]["total_model_rounds"] == 1
    assert st["last_wake_reason"] == "operator_input"


def test_turn_plain_prints_final_text(script_runner, tmp_path: Path) -> None:
    script_runner.run(["holon", "enqueue", "hi"], check=True)
    res = script_runner.run(
        ["holon", "turn", "--model", script(tmp_path, [{"text": "the answer"}])]
    )
    assert res.returncode == 0 and res.stdout.strip() == "the answer"


def test_turn_provider_failure_exit_5(script_runner, tmp_path: Path) -> None:
    script_runner.run(["holon", "enqueue", "hi"], check=True)
    res = script_runner.run(
        [
            "holon",
            "turn",
            "--model",
            script(tmp_path, [{"fail": {"kind": "client_error", "status": 400}}]),  # fail-fast
        ]
    )
    assert res.returncode == 5
    assert "Traceback" not in res.stderr


def test_turn_all_and_agent_conflict(script_runner) -> None:
    res = script_runner.run(["holon", "turn", "--all", "--agent", "main"])
    assert res.returncode == 2 and "either --agent or --all" in res.stderr


def test_turn_all_runs_each_agent_with_work(script_runner, tmp_path: Path) -> None:
    model = script(
        tmp_path,
        [{"text": "a", "usage": {"input_tokens": 1, "output_tokens": 1}}, {"text": "b"}],
        name="shared.yaml",
    )
    script_runner.run(["holon", "agent", "create", "other"], check=True)
    script_runner.run(["holon", "enqueue", "for main"], check=True)
    script_runner.run(["holon", "enqueue", "for other", "--agent", "other"], check=True)
    script_runner.run(["holon", "agent", "create", "idle"], check=True)
    res = script_runner.run(["holon", "turn", "--all", "--model", model, "--json"])
    assert res.returncode == 0, res.stderr
    turns = j(res)["data"]["turns"]
    assert sorted(t["agent_id"] for t in turns) == ["main", "other"]


def test_bad_model_ref_is_usage_error_and_nothing_dequeued(script_runner) -> None:
    script_runner.run(["holon", "enqueue", "hi"], check=True)
    res = script_runner.run(["holon", "turn", "--model", "nonsense"])
    assert res.returncode == 2 and "invalid model ref" in res.stderr
    assert j(script_runner.run(["holon", "status", "--json"]))["data"]["pending"] == 1


def test_run_unknown_agent_without_create(script_runner, tmp_path: Path) -> None:
    res = script_runner.run(
        ["holon", "run", "--agent", "ghost", "--model", script(tmp_path, [{"text": "x"}]), "hi"]
    )
    assert res.returncode == 3 and "--create-agent" in res.stderr


def test_run_create_agent_then_reuse(script_runner, tmp_path: Path) -> None:
    model = script(tmp_path, [{"text": "one"}, {"text": "two"}])
    res = script_runner.run(
        ["holon", "run", "--agent", "helper", "--create-agent", "--model", model, "hi"]
    )
    assert res.returncode == 0 and res.stdout.strip() == "one"
    res = script_runner.run(["holon", "run", "--agent", "helper", "--model", model, "again"])
    assert res.returncode == 0 and res.stdout.strip() == "two"
    listed = j(script_runner.run(["holon", "agent", "list", "--json"]))["data"]["agents"]
    assert "helper" in [a["agent_id"] for a in listed]


def test_run_max_turns_and_cwd_validation(script_runner, tmp_path: Path) -> None:
    model = script(tmp_path, [{"text": "x"}])
    assert (
        script_runner.run(["holon", "run", "--max-turns", "0", "--model", model, "hi"]).returncode
        == 2
    )
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    res = script_runner.run(
        ["holon", "run", "--workspace-root", str(ws), "--cwd", str(outside), "--model", model, "hi"]
    )
    assert res.returncode == 2 and "outside the workspace root" in res.stderr


def test_debug_prompt_shows_sources(script_runner, tmp_path: Path) -> None:
    res = script_runner.run(["holon", "debug", "prompt", "--json"])
    assert res.returncode == 0, res.stderr
    d = j(res)["data"]
    for k in (
        "agent_home",
        "workspace_id",
        "workspace_anchor",
        "execution_root",
        "cwd",
        "execution_policy",
        "instructions",
        "prompt_cache_key",
        "sections",
    ):
        assert k in d
    assert d["instructions"][0]["scope"] == "agent" and d["instructions"][0]["path"].endswith(
        "AGENTS.md"
    )
    assert "content" not in d["instructions"][0]  # metadata only
    pol = d["execution_policy"]  # the default (auto): bwrap where it works here
    assert pol["sandbox_setting"] == "auto" and pol["sandbox"] in ("bwrap", "none")
    assert pol["path_confinement"] == ("enforced" if pol["sandbox"] == "bwrap" else "not_enforced")
    plain = script_runner.run(["holon", "debug", "prompt", "--full"])
    assert "sections (in prompt order)" in plain.stdout and "=== system prompt ===" in plain.stdout


def test_debug_latency_breakdown(script_runner, tmp_path: Path) -> None:
    model = script(
        tmp_path,
        [{"tool_calls": [{"name": "ExecCommand", "arguments": {"cmd": "true"}}]}, {"text": "ok"}],
    )
    script_runner.run(["holon", "enqueue", "hi"], check=True)
    script_runner.run(["holon", "turn", "--model", model], check=True)
    res = script_runner.run(["holon", "debug", "latency", "--json"])
    turns = j(res)["data"]["turns"]
    assert len(turns) == 1
    t = turns[0]
    assert t["queue_wait_ms"] is not None and t["context_build_ms"] is not None
    assert (
        len(t["provider_rounds"]) == 2
        and len(t["tools"]) == 1
        and t["tools"][0]["tool_name"] == "ExecCommand"
    )
    assert t["cleanup_ms"] is not None and t["total_ms"] >= t["provider_ms"]
    plain = script_runner.run(["holon", "debug", "latency"])
    assert "QUEUE WAIT MS" in plain.stdout


def test_agent_model_override_visible_in_status(script_runner, monkeypatch) -> None:
    monkeypatch.setenv("HOLON_MODEL", "openai/gpt-4.1")
    monkeypatch.setenv("HOLON_FALLBACK_MODELS", "anthropic/claude-x, openai/gpt-4.1-mini")
    script_runner.run(
        ["holon", "agent", "create", "r", "--model", "anthropic/claude-y"], check=True
    )
    m = j(script_runner.run(["holon", "status", "--agent", "r", "--json"]))["data"]["model"]
    assert m["source"] == "agent_override" and m["effective_model"] == "anthropic/claude-y"
    assert m["runtime_default_model"] == "openai/gpt-4.1"
    assert m["effective_fallback_models"] == ["anthropic/claude-x", "openai/gpt-4.1-mini"]
    script_runner.run(["holon", "agent", "model", "r", "--clear"], check=True)
    m = j(script_runner.run(["holon", "status", "--agent", "r", "--json"]))["data"]["model"]
    assert m["source"] == "runtime_default" and m["effective_model"] == "openai/gpt-4.1"
    bad = script_runner.run(["holon", "agent", "create", "s", "--model", "nope"])
    assert bad.returncode == 2
    assert script_runner.run(["holon", "agent", "status", "s"]).returncode == 3  # nothing half-made


def test_tick_ingests_and_reports(script_runner) -> None:
    from holon_cli.runtime.enqueue import admit

    admit("a")  # delivered, not ingested (`holon enqueue` would ingest at once)
    res = script_runner.run(["holon", "tick", "--json"])
    assert res.returncode == 0
    acts = j(res)["data"]["agents"][0]["actions"]
    assert acts[0] == {"action": "ingested", "count": 1}
    res = script_runner.run(["holon", "tick"])
    assert "nothing to do" in res.stdout


def test_relative_scripted_override_is_stored_absolute(script_runner, tmp_path: Path) -> None:
    (tmp_path / "rel.yaml").write_text("steps:\n  - text: from relative\n")
    res = script_runner.run(
        ["holon", "agent", "create", "rel", "--model", "scripted:rel.yaml"], cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    m = j(script_runner.run(["holon", "agent", "model", "rel", "--json"]))["data"]["model"]
    assert m["override_model"] == f"scripted:{tmp_path / 'rel.yaml'}"
    script_runner.run(["holon", "enqueue", "--agent", "rel", "hi"], check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = script_runner.run(["holon", "turn", "--agent", "rel"], cwd=elsewhere)
    assert out.returncode == 0 and out.stdout.strip() == "from relative"


def test_status_reports_loaded_agents_md_metadata_only(script_runner) -> None:
    d = j(script_runner.run(["holon", "status", "--json"]))["data"]
    (src,) = d["loaded_agents_md"]
    assert src["scope"] == "agent" and src["kind"] == "AGENTS.md" and src["bytes"] > 0
    assert set(src) == {"scope", "kind", "path", "bytes", "sha256"}


def test_run_removes_a_completed_temporary_agent_unless_kept(
    script_runner, tmp_path: Path, holon_home: Path
) -> None:
    model = script(tmp_path, [{"text": "ok"}])
    d = j(script_runner.run(["holon", "run", "--json", "--model", model, "hi"]))["data"]
    assert d["final_status"] == "completed" and d["agent_kept"] is False
    assert not Path(d["agent_home"]).exists()
    d = j(
        script_runner.run(
            [
                "holon",
                "run",
                "--json",
                "--keep-agent",
                "--model",
                script(tmp_path, [{"text": "ok"}], "k.yaml"),
                "hi",
            ]
        )
    )["data"]
    assert d["agent_kept"] is True and Path(d["agent_home"]).is_dir()
    failed = script_runner.run(
        [
            "holon",
            "run",
            "--json",
            "--model",
            script(tmp_path, [{"fail": {"kind": "auth"}}], "f.yaml"),
            "hi",
        ]
    )
    fd = json.loads(failed.stdout)["data"]
    assert (
        failed.returncode == 5 and fd["agent_kept"] is True and Path(fd["agent_home"]).is_dir()
    )  # kept to inspect
    named = j(
        script_runner.run(
            [
                "holon",
                "run",
                "--json",
                "--agent",
                "keepme",
                "--create-agent",
                "--model",
                script(tmp_path, [{"text": "ok"}], "n.yaml"),
                "hi",
            ]
        )
    )["data"]
    assert named["agent_kept"] is True  # a named agent is never removed


def test_bad_inputs_of_turn_engine_commands(script_runner, tmp_path: Path) -> None:
    cases = [
        (["holon", "tick", "--all", "--agent", "main"], 2, "either --agent or --all"),
        (["holon", "agent", "model", "main", "openai/x", "--clear"], 2, "either MODEL or --clear"),
        (["holon", "debug", "prompt", "--agent", "ghost"], 3, "unknown agent"),
        (["holon", "debug", "latency", "--limit", "0"], 2, "--limit"),
        (
            [
                "holon",
                "run",
                "--cwd",
                str(tmp_path / "missing"),
                "--model",
                "scripted:x.yaml",
                "hi",
            ],
            2,
            "not a directory",
        ),
        (["holon", "turn", "--agent", "ghost", "--model", "scripted:x.yaml"], 3, "unknown agent"),
    ]
    for argv, code, text in cases:
        res = script_runner.run(argv)
        assert res.returncode == code, (argv, res.returncode, res.stderr)
        assert text in res.stderr and "Traceback" not in res.stderr, (argv, res.stderr)
    # nothing was created for the unknown agent
    listed = j(script_runner.run(["holon", "agent", "list", "--json"]))["data"]["agents"]
    assert "ghost" not in [a["agent_id"] for a in listed]


def test_debug_prompt_sections_carry_text_in_prompt_order(script_runner) -> None:
    """Contract: `holon debug prompt --json` data `sections[] {title, text}` in
    prompt order; `execution binding` before `tool guidance` (runtime spec:
    the execution contract is block 1, tool guidance block 6)."""
    res = script_runner.run(["holon", "debug", "prompt", "--json", "--message", "hello"])
    assert res.returncode == 0, res.stderr
    d = j(res)["data"]
    titles = [s["title"] for s in d["sections"]]
    assert titles[:3] == ["runtime policy", "execution binding", "turn mode guidance"]
    assert titles.index("execution binding") < titles.index("tool guidance")
    assert all(isinstance(s["text"], str) and len(s["text"]) == s["chars"] for s in d["sections"])
    # the texts, in order, are the frame: system prompt, system blocks, context blocks
    assert [s["text"] for s in d["sections"]] == [
        d["system_prompt"],
        *d["system_blocks"],
        *d["context_blocks"],
    ]
    binding = d["sections"][1]["text"]
    assert f"cwd: {d['cwd']}" in binding and f"agent_home: {d['agent_home']}" in binding
    again = j(script_runner.run(["holon", "debug", "prompt", "--json", "--message", "hello"]))
    assert again["data"]["sections"] == d["sections"]  # byte-stable
    assert again["data"]["prompt_cache_key"] == d["prompt_cache_key"]
