"""Bad input to every subcommand: exit code 2, one line on stderr naming the problem, no traceback, and nothing
created (no output file or directory, no mark, no partial result) — checked on the whole working directory."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pgrpo_sim.cli import main

DATA = Path(__file__).parent / "data"
LOG = str(DATA / "generic.csv")

THEORY = ["theory", "--eta", "0.05", "--momentum", "0.9", "--lag", "2", "--stiffness", "0.3"]
SIMULATE = ["simulate", "--steps", "5", "--out", "traj.csv"]
PREDICT = ["predict", "--beta", "0.5"]
OSCILLATOR = ["oscillator", "--eta", "0.05", "--stiffness", "0.3", "--noise", "0.01", "--group-size", "8"]
OSCILLATOR += ["--steps", "5", "--paths", "4", "--out", "osc.csv"]
SWEEP = ["sweep", "--grid", "learning_rate=0.1,0.2", "--beta", "0.5", "--steps", "5", "--quiet", "--out", "d"]
PHASE = [
    "phase-diagram",
    "--grid",
    "learning_rate=0.1,0.2",
    "--grid",
    "lag=0:1",
    "--steps",
    "5",
    "--quiet",
    "--out",
    "d",
]
VALIDATE = ["validate", "--quick", "--out", "d"]
FIT = ["fit", LOG, "--column", "reward=my_reward", "--out", "d"]
TUNE = ["tune", "--objective", "damping-ratio", "--target", "1", "--beta", "0.5", "--restarts", "1"]
TUNE += ["--iterations", "1", "--out", "d"]
FORECAST = ["forecast", LOG, "--column", "reward=my_reward", "--out", "d"]
WATCH = ["watch", LOG, "--column", "reward=my_reward", "--until", "40", "--out", "d"]

# (argv, a word the one-line message must contain); "FOREIGN" and "OTHER" are output directories prepared below:
# FOREIGN holds a file pgrpo-sim did not write, OTHER holds another command's marked output
CASES = {
    # theory
    "theory negative learning_rate": ([*THEORY, "--eta", "-1"], "learning_rate"),
    "theory zero stiffness": ([*THEORY, "--stiffness", "0"], "stiffness"),
    "theory nan learning_rate": ([*THEORY, "--eta", "nan"], "--eta"),
    "theory inf stiffness": ([*THEORY, "--stiffness", "inf"], "--stiffness"),
    "theory momentum out of range": ([*THEORY, "--momentum", "1"], "momentum"),
    "theory negative lag": ([*THEORY, "--lag", "-1"], "lag"),
    "theory group size out of range": ([*THEORY, "--noise", "0.1", "--group-size", "1"], "num_generations"),
    "theory fractional group size": ([*THEORY, "--noise", "0.1", "--group-size", "2.5"], "--group-size"),
    # simulate
    "simulate negative learning_rate": ([*SIMULATE, "--eta", "-0.1"], "learning_rate"),
    "simulate zero steps": ([*SIMULATE, "--steps", "0"], "steps"),
    "simulate negative seeds": ([*SIMULATE, "--mode", "sampled", "--seeds", "-1"], "seeds"),
    "simulate too many seeds": ([*SIMULATE, "--mode", "sampled", "--seeds", "100000000000"], "seeds must be in"),
    # a bandit parameter named with its flag: mini-batches per rollout cannot outnumber its prompts (1 by default)
    "simulate more mini-batches than prompts": (
        [*SIMULATE, "--lag-model", "refresh", "--steps-per-generation", "2"],
        "minibatches (--steps-per-generation) must be in [1, 1], got 2",
    ),
    # a flag that would do nothing
    "simulate kl clamp of k1": ([*SIMULATE, "--kl", "k1", "--kl-clamp", "5"], "--kl-clamp bounds the k3 estimator"),
    "sweep kl clamp of k2": ([*SWEEP, "--kl", "k2", "--kl-clamp", "5"], "--kl-clamp bounds the k3 estimator"),
    "oscillator more sample paths than paths": ([*OSCILLATOR, "--sample-paths", "5"], "sample_paths must be in [0, 4]"),
    "sweep trajectories beyond the steps": ([*SWEEP, "--save-trajectories", "6"], "trajectories must be in [0, 5]"),
    # a refused whole number in full beside its limit, not 1.04858e+06, which reads as within it
    "simulate one seed too many": (
        [*SIMULATE, "--mode", "sampled", "--seeds", "1048577"],
        "seeds must be in [1, 1048576], got 1048577",
    ),
    "simulate one arm (the library's n_arms named with its flag)": ([*SIMULATE, "--arms", "1"], "n_arms (--arms) must"),
    # each within its range, together beyond any machine's memory (1e6 × 1e8 steps × the read-outs: 1.9e7 GB)
    "simulate read-outs beyond memory": (
        ["simulate", "--steps", "100000000", "--mode", "sampled", "--seeds", "1000000", "--out", "traj.csv"],
        "GB of read-outs",
    ),
    "simulate seed beyond 32 bits": ([*SIMULATE, "--seed", str(2**32)], "4294967295"),
    "simulate nan beta": ([*SIMULATE, "--beta", "nan"], "--beta"),
    "simulate inf learning_rate": ([*SIMULATE, "--eta", "inf"], "--eta"),
    "simulate p_ref out of range": ([*SIMULATE, "--p-ref", "1.5"], "p_ref"),
    "simulate unknown mode": ([*SIMULATE, "--mode", "exact"], "--mode"),
    "simulate unknown optimizer": ([*SIMULATE, "--optimizer", "rmsprop"], "--optimizer"),
    "simulate unwritable out": ([*SIMULATE, "--out", "FILE/traj.csv"], "--out"),
    "simulate out is a directory": ([*SIMULATE, "--out", "FOREIGN"], "--out"),
    "simulate unwritable plot": ([*SIMULATE, "--plot", "FILE/x.png"], "--plot"),
    "simulate plot is a directory": ([*SIMULATE, "--plot", "FOREIGN"], "--plot"),
    "simulate plot without image suffix": ([*SIMULATE, "--plot", "curve"], "--plot"),
    "simulate existing out": ([*SIMULATE, "--out", "FILE"], "--overwrite"),
    "simulate out inside another command's directory": ([*SIMULATE, "--out", "OTHER/report.md"], "--overwrite"),
    "simulate existing plot": ([*SIMULATE, "--plot", "PLOT.png"], "--overwrite"),
    # predict
    "predict zero learning_rate": ([*PREDICT, "--eta", "0"], "learning_rate"),
    "predict negative beta": ([*PREDICT, "--beta", "-1"], "beta"),
    "predict nan momentum": ([*PREDICT, "--momentum", "nan"], "--momentum"),
    "predict inf clip": ([*PREDICT, "--clip", "inf"], "--clip"),
    "predict group size out of range": ([*PREDICT, "--group-size", "1"], "num_generations"),
    "predict unknown kl": ([*PREDICT, "--kl", "k4"], "--kl"),
    # oscillator
    "oscillator nan e0": ([*OSCILLATOR, "--e0", "nan"], "--e0"),
    "oscillator inf e0": ([*OSCILLATOR, "--e0", "inf"], "--e0"),
    "oscillator nan v0": ([*OSCILLATOR, "--v0", "nan"], "--v0"),
    "oscillator dt too large": ([*OSCILLATOR, "--dt", "100"], "dt"),
    "oscillator dt unresolved": ([*OSCILLATOR, "--momentum", "0.99", "--dt", "0.5", "--steps", "500"], "dt must be <="),
    "oscillator zero dt": ([*OSCILLATOR, "--dt", "0"], "dt"),
    "oscillator negative sample paths": ([*OSCILLATOR, "--sample-paths", "-1"], "sample_paths"),
    "oscillator zero steps": ([*OSCILLATOR, "--steps", "0"], "steps"),
    "oscillator zero paths": ([*OSCILLATOR, "--paths", "0"], "paths"),
    "oscillator negative noise": ([*OSCILLATOR, "--noise", "-1"], "noise"),
    "oscillator unwritable out": ([*OSCILLATOR, "--out", "FILE/osc.csv"], "--out"),
    "oscillator unwritable plot": ([*OSCILLATOR, "--plot", "FILE/osc.png"], "--plot"),
    "oscillator plot is a directory": ([*OSCILLATOR, "--plot", "FOREIGN"], "--plot"),
    "oscillator existing out": ([*OSCILLATOR, "--out", "FILE"], "--overwrite"),
    "oscillator existing plot": ([*OSCILLATOR, "--plot", "PLOT.png"], "--overwrite"),
    # sweep
    "sweep negative chunk size": ([*SWEEP, "--chunk-size", "-1"], "chunk_size"),
    "sweep zero chunk size": ([*SWEEP, "--chunk-size", "0"], "chunk_size"),
    "sweep negative max memory": ([*SWEEP, "--max-memory", "-1"], "max_memory"),
    "sweep negative max memory, exponent": ([*SWEEP, "--max-memory", "-1e9"], "max_memory"),
    "sweep nan max memory": ([*SWEEP, "--max-memory", "nan"], "--max-memory"),
    "sweep inf max memory": ([*SWEEP, "--max-memory", "inf"], "--max-memory"),
    "sweep processes without coordinator": ([*SWEEP, "--num-processes", "2"], "--coordinator"),
    "sweep coordinator not host:port": (
        [*SWEEP, "--coordinator", "localhost", "--num-processes", "2", "--process-id", "0"],
        "--coordinator must be HOST:PORT",
    ),
    "sweep zero processes": (
        [*SWEEP, "--coordinator", "localhost:1", "--num-processes", "0", "--process-id", "0"],
        "--num-processes must be >= 1",
    ),
    "sweep process id out of range": (
        [*SWEEP, "--coordinator", "localhost:1", "--num-processes", "2", "--process-id", "2"],
        "--process-id must be",
    ),
    "sweep zero clip": ([*SWEEP, "--clip", "0"], "epsilon must be in (0, 1)"),
    "sweep grid value zero": (
        ["sweep", "--grid", "learning_rate=0,0.1", "--steps", "5", "--quiet", "--out", "d"],
        "learning_rate=0,0.1",
    ),
    "sweep grid out of range": ([*SWEEP, "--grid", "momentum=0:1:5"], "momentum"),
    "sweep grid negative lag": ([*SWEEP, "--grid", "lag=-1:3", "--lag-model", "stale"], "lag"),
    "sweep grid nan": ([*SWEEP, "--grid", "beta=nan,0.1"], "beta"),
    "sweep grid step read as a count": ([*SWEEP, "--grid", "beta=0.1:0.5:0.1"], "a count of values"),
    "sweep grid one value of a range": ([*SWEEP, "--grid", "beta=0.1:0.5:1"], "gives start alone"),
    "sweep grid inf": ([*SWEEP, "--grid", "beta=0.1,inf"], "beta"),
    "sweep grid group size 1": ([*SWEEP, "--grid", "num_generations=1,2"], "num_generations"),
    "sweep grid group size beyond MAX_GROUP_SIZE": ([*SWEEP, "--grid", "num_generations=8,100000"], "[2, 4096]"),
    "sweep seed beyond 64 bits": ([*SWEEP, "--seed", "99999999999999999999"], "seed must be in [0, 4294967295]"),
    "sweep steps beyond MAX_STEPS": ([*SWEEP, "--steps", "100000000000"], "steps must be in [1, 100000000]"),
    "simulate group size beyond MAX_GROUP_SIZE": ([*SIMULATE, "--group-size", "100000"], "[2, 4096]"),
    "predict group size beyond MAX_GROUP_SIZE": ([*PREDICT, "--group-size", "100000"], "[2, 4096]"),
    "tune steps beyond MAX_STEPS": ([*TUNE, "--steps", "100000000000"], "steps must be in [1, 100000000]"),
    "sweep fixed momentum out of range": ([*SWEEP, "--momentum", "1.0"], "momentum"),
    "sweep fixed group size 1": ([*SWEEP, "--group-size", "1"], "num_generations"),
    "sweep sampled with one seed": ([*SWEEP, "--mode", "sampled", "--seeds", "1"], "seeds"),
    "sweep zero steps": ([*SWEEP, "--steps", "0"], "steps"),
    "sweep negative save trajectories": ([*SWEEP, "--save-trajectories", "-1"], "save_trajectories"),
    "sweep unknown mode": ([*SWEEP, "--mode", "exact"], "--mode"),
    "sweep zero steps per generation": ([*SWEEP, "--steps-per-generation", "0"], "--steps-per-generation"),
    "sweep zero iterations": ([*SWEEP, "--num-iterations", "0"], "--num-iterations"),
    "sweep lag grid not a multiple of mini-batches": (
        [
            *SWEEP,
            "--grid",
            "lag=2:4",
            "--lag-model",
            "refresh",
            "--steps-per-generation",
            "2",
            "--prompts",
            "4",
            "--mode",
            "sampled",
            "--seeds",
            "2",
        ],
        "multiple of minibatches",
    ),
    "sweep expected-mode reuse of several prompts": (
        [*SWEEP, "--lag-model", "refresh", "--lag", "2", "--prompts", "4"],
        "one prompt",
    ),
    "sweep expected-mode reuse of too many rollouts": (
        [*SWEEP, "--lag-model", "refresh", "--lag", "2", "--arms", "6", "--group-size", "16"],
        "4096",
    ),
    "sweep expected-mode reuse of too many rollouts at one group size": (
        [*SWEEP, "--lag-model", "refresh", "--lag", "2", "--arms", "5", "--grid", "num_generations=4,16"],
        "G = 16",
    ),
    "sweep unknown grid name": ([*SWEEP, "--grid", "temperature=1,2"], "temperature"),
    "sweep flag and grid set learning_rate": ([*SWEEP, "--eta", "0.3"], "--eta"),
    "sweep flag equal to its default and grid set learning_rate": ([*SWEEP, "--eta", "0.1"], "--eta"),
    "sweep --num-iterations and a lag grid": (
        [*SWEEP, "--lag-model", "refresh", "--num-iterations", "2", "--grid", "lag=1:2"],
        "--num-iterations",
    ),
    "sweep --steps-per-generation and a minibatches grid": (
        [*SWEEP, "--lag-model", "refresh", "--steps-per-generation", "2", "--grid", "minibatches=1,2"],
        "--steps-per-generation",
    ),
    "phase-diagram flag on a default axis": ([*PHASE[:1], "--eta", "0.2", "--grid", "lag=0:1", "--out", "d"], "--eta"),
    "sweep unwritable out": ([*SWEEP, "--out", "FILE/d"], "--out"),
    "sweep foreign out": ([*SWEEP, "--out", "FOREIGN"], "--overwrite"),
    "sweep another command's out": ([*SWEEP, "--out", "OTHER"], "validate"),
    # phase-diagram
    "phase adam refused before the sweep": ([*PHASE, "--optimizer", "adam"], "adam"),
    "phase beta 0 has nothing to predict": ([*PHASE, "--beta", "0"], "fixed point"),
    "phase negative beta": ([*PHASE, "--beta", "-1"], "beta"),
    "phase zero steps": ([*PHASE, "--steps", "0"], "steps"),
    "sweep seed beyond 32 bits": ([*SWEEP, "--seed", str(2**32)], "4294967295"),
    "phase nan momentum": ([*PHASE, "--momentum", "nan"], "--momentum"),
    "phase inf max memory": ([*PHASE, "--max-memory", "inf"], "--max-memory"),
    "phase grid out of range": (
        [
            "phase-diagram",
            "--y",
            "momentum",
            "--grid",
            "learning_rate=0.1,0.2",
            "--grid",
            "momentum=0:1:5",
            "--out",
            "d",
        ],
        "momentum",
    ),
    "phase axis without default": ([*PHASE, "--x", "beta"], "beta"),
    "phase unknown optimizer": ([*PHASE, "--optimizer", "rmsprop"], "--optimizer"),
    "phase unwritable out": ([*PHASE, "--out", "FILE/d"], "--out"),
    "phase foreign out": ([*PHASE, "--out", "FOREIGN"], "--overwrite"),
    "phase another command's out": ([*PHASE, "--out", "OTHER"], "validate"),
    # validate
    "validate negative seed": ([*VALIDATE, "--seed", "-1"], "seed"),
    "validate nan seed": ([*VALIDATE, "--seed", "nan"], "--seed"),
    "validate unwritable out": ([*VALIDATE, "--out", "FILE/d"], "--out"),
    "validate foreign out": ([*VALIDATE, "--out", "FOREIGN"], "--overwrite"),
    "validate another command's out": ([*VALIDATE, "--out", "FIT"], "fit"),
    # fit
    "fit zero samples per step": ([*FIT, "--samples-per-step", "0"], "samples per step"),
    "fit negative samples per step": ([*FIT, "--samples-per-step", "-1"], "samples per step"),
    "fit nan samples per step": ([*FIT, "--samples-per-step", "nan"], "--samples-per-step"),
    "fit inf samples per step": ([*FIT, "--samples-per-step", "inf"], "--samples-per-step"),
    "fit fractional samples per step": ([*FIT, "--samples-per-step", "1.5"], "--samples-per-step"),
    "fit unknown format": ([*FIT, "--format", "xml"], "--format"),
    "fit unknown metric": ([*FIT, "--metric", "loss"], "loss"),
    "fit missing log": (["fit", "no-such-log.csv", "--out", "d"], "not found"),
    "fit unwritable out": ([*FIT, "--out", "FILE/d"], "--out"),
    "fit foreign out": ([*FIT, "--out", "FOREIGN"], "--overwrite"),
    "fit another command's out": ([*FIT, "--out", "OTHER"], "validate"),
    # forecast
    "forecast until before the fit window ends": ([*FORECAST, "--fit-until", "10", "--until", "5"], "until"),
    "forecast fit window beyond the log": ([*FORECAST, "--fit-until", "1e6"], "fit-until"),
    "forecast negative seed": ([*FORECAST, "--seed", "-1"], "seed"),
    "calibrate negative seed": (["calibrate", *FORECAST[1:], "--seed", "-1"], "seed"),
    "forecast beyond ten fit windows": ([*FORECAST, "--fit-until", "10", "--until", "101"], "until must be in"),
    "forecast until inside the whole-log fit window": ([*FORECAST, "--until", "10"], "until must be in [25, "),
    "forecast until not a step": ([*FORECAST, "--fit-until", "10", "--until", "20.5"], "until must be an integer"),
    "what-if beyond ten fit windows": (
        [
            "what-if",
            LOG,
            "--column",
            "reward=my_reward",
            "--scenario",
            "learning_rate=0.5",
            "--steps",
            "242",
            "--out",
            "d",
        ],
        "steps must be in",
    ),
    # tune
    "tune negative lag, space-separated": ([*TUNE, "--lag-model", "stale", "--lags", "-1,2"], "lags must be >= 0"),
    "tune group size out of range": ([*TUNE, "--group-sizes", "1,2"], "group_sizes"),
    "tune zero restarts": ([*TUNE, "--restarts", "0"], "restarts"),
    "tune negative iterations": ([*TUNE, "--iterations", "-1"], "iterations"),
    "tune nan learning rate": ([*TUNE, "--learning-rate", "nan"], "--learning-rate"),
    "tune negative damping-ratio bound": ([*TUNE, "--min-damping-ratio", "-1"], "min_damping_ratio"),
    "tune inf radius margin": ([*TUNE, "--radius-margin", "inf"], "--radius-margin"),
    "tune zero learning_rate": ([*TUNE, "--search", "momentum", "--eta", "0"], "learning_rate"),
    "tune flag of a searched name": ([*TUNE, "--eta", "0.5"], "--eta sets learning_rate, which tune searches"),
    "tune unknown objective": ([*TUNE, "--objective", "speed"], "--objective"),
    "tune empty search": ([*TUNE, "--search", ""], "--search ''"),
    "tune unwritable out": ([*TUNE, "--out", "FILE/d"], "--out"),
    "tune foreign out": ([*TUNE, "--out", "FOREIGN"], "--overwrite"),
    "tune another command's out": ([*TUNE, "--out", "OTHER"], "validate"),
    "tune nan search step": ([*TUNE, "--search-lr", "nan"], "--search-lr"),
    "tune zero search step": ([*TUNE, "--search-lr", "0"], "search_lr"),
    # 6: memory and the floating-point range of the oscillator (each value out of range in float32 and float64)
    "oscillator paths beyond memory": ([*OSCILLATOR, "--paths", "100000000", "--steps", "100000"], "GB of paths"),
    "oscillator subnormal learning_rate": (
        [*OSCILLATOR, "--eta", "1e-320"],
        "learning_rate = 9.99989e-321 is outside the range",
    ),
    "oscillator overflowing K·learning_rate": (
        [*OSCILLATOR, "--eta", "1e300", "--stiffness", "1e10"],
        "outside the range",
    ),
    # 7: theory beyond float64
    "theory overflowing K·learning_rate": ([*THEORY, "--eta", "1e308", "--stiffness", "1e308"], "Kη = inf"),
    "theory subnormal learning_rate": (
        [*THEORY, "--eta", "1e-320"],
        "outside the range the computation supports (float64",
    ),
    "theory subnormal stiffness": ([*THEORY, "--stiffness", "1e-310"], "stiffness = 1e-310"),
    "theory mass overflows": ([*THEORY, "--eta", "1e-309", "--lag", "0"], "outside the range"),
    "theory map below float64 resolution": ([*THEORY, "--eta", "1e-20", "--momentum", "0"], "resolution"),
    "theory stationary variance overflows": (
        [*THEORY, "--stiffness", "1e-3", "--noise", "1e308", "--group-size", "2"],
        "variance",
    ),
    # 8: no abbreviations
    "predict --steps is not --steps-per-generation": ([*PREDICT, "--steps", "100"], "unrecognized arguments: --steps"),
    "simulate abbreviated --seed": ([*SIMULATE, "--se", "3"], "unrecognized arguments: --se"),
    "sweep abbreviated --grid": ([*SWEEP, "--gri", "beta=0.1,0.2"], "unrecognized arguments: --gri"),
    # 9: flags that would do nothing
    "simulate seeds in expected mode": ([*SIMULATE, "--seeds", "64"], "--seeds"),
    "sweep seeds in expected mode": ([*SWEEP, "--seeds", "8"], "--seeds"),
    "simulate ref-sync-alpha without ref-sync-steps": ([*SIMULATE, "--ref-sync-alpha", "0.5"], "--ref-sync-steps"),
    "sweep ref_sync_alpha axis without ref-sync-steps": ([*SWEEP, "--grid", "ref_sync_alpha=0.2,0.4"], "--ref-sync"),
    "simulate clip-high below clip": ([*SIMULATE, "--clip-high", "0.1"], "--epsilon-high 0.1"),
    "sweep clip axis above clip-high": ([*SWEEP, "--grid", "epsilon=0.1,0.3", "--clip-high", "0.2"], "--epsilon-high"),
    "run config epsilon_high below epsilon": ([*FORECAST, "--run-config", "CLIP.yaml"], "epsilon_high"),
    # 14: TRL names: the same checks as the short forms
    "simulate epsilon-high below epsilon": ([*SIMULATE, "--epsilon", "0.3", "--epsilon-high", "0.2"], "--epsilon-high"),
    "simulate one generation": ([*SIMULATE, "--num-generations", "1"], "num_generations"),
    "simulate negative learning rate": ([*SIMULATE, "--learning-rate", "-1"], "learning_rate"),
    "simulate loss type not simulated": ([*SIMULATE, "--loss-type", "cispo"], "not simulated"),
    "simulate scale-rewards against advantage": ([*SIMULATE, "--scale-rewards", "none", "--advantage", "std"], "mean"),
    "tune TRL name of a searched learning_rate": ([*TUNE, "--learning-rate", "0.5"], "which tune searches"),
    # 15: TRL and verl run configs
    "run config TRL dump with a partial group": ([*FORECAST, "--run-config", "TRL_PARTIAL.json"], "whole number"),
    "run config verl with another estimator": ([*FORECAST, "--run-config", "VERL_GAE.yaml"], "adv_estimator"),
    # watch (issue 49): every flag before the log is followed or a worker started
    "watch every zero": ([*WATCH, "--every", "0"], "every must be"),
    "watch alert above one": ([*WATCH, "--alert", "1.5"], "alert must be in"),
    "watch alert zero": ([*WATCH, "--alert", "0"], "alert must be in"),
    "watch idle zero": ([*WATCH, "--idle", "0"], "idle must be"),
    "watch poll negative": ([*WATCH, "--poll", "-1"], "poll must be"),
    "watch no end of run": (["watch", LOG, "--out", "d"], "max_steps in --run-config, or --until"),
    "watch run config without max_steps": (["watch", LOG, "--run-config", "CLIP.yaml", "--out", "d"], "max_steps"),
    "watch into another command's output": ([*WATCH[:-1], "OTHER"], "pgrpo-sim validate"),
    "watch band out of range": ([*WATCH, "--band", "1"], "band must be in"),
}


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"") for p in sorted(root.rglob("*"))}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("FILE").write_text("a file, not a directory\n")
    Path("PLOT.png").write_bytes(b"a user's figure")
    Path("FOREIGN").mkdir()
    Path("FOREIGN/notes.txt").write_text("mine\n")
    for name, command in (("OTHER", "validate"), ("FIT", "fit")):
        Path(name).mkdir()
        Path(name, ".pgrpo-sim.json").write_text(json.dumps({"command": command, "outputs": ["report.md"]}))
        Path(name, "report.md").write_text(f"# {command} report\n")
    Path("CLIP.yaml").write_text("epsilon: 0.2\nepsilon_high: 0.1\n")
    # a TRL dump whose rollout (per device 4 × steps_per_generation 1) holds half a group of 8
    Path("TRL_PARTIAL.json").write_text(json.dumps({"output_dir": "o", "per_device_train_batch_size": 4}))
    Path("VERL_GAE.yaml").write_text("algorithm:\n  adv_estimator: gae\n")
    return tmp_path


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exit_2_one_line_nothing_created(case, workdir, capsys):
    argv, word = CASES[case]
    before = _tree(workdir)
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and err.startswith("pgrpo-sim: error:"), err
    assert word in err, err
    assert "Traceback" not in err + captured.out
    assert _tree(workdir) == before, f"{case}: files changed"


@pytest.mark.slow
def test_console_script_bad_input_has_no_traceback(tmp_path):
    """The real console process (stderr as a user sees it) for one case per kind of failure."""
    for argv in (
        ["sweep", "--grid", "learning_rate=0.1", "--chunk-size", "-1", "--out", str(tmp_path / "d")],
        [
            "oscillator",
            "--eta",
            "0.05",
            "--stiffness",
            "0.3",
            "--noise",
            "0.1",
            "--group-size",
            "8",
            "--e0",
            "nan",
            "--out",
            str(tmp_path / "o.csv"),
        ],
    ):
        proc = subprocess.run([sys.executable, "-m", "pgrpo_sim.cli", *argv], capture_output=True, text=True)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []
