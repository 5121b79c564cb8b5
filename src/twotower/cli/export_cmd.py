"""`twotower export`: a run's towers as ONNX (checked with onnxruntime) plus item embeddings as .npy."""
from __future__ import annotations

import argparse

from twotower.cli.stopping import sigterm_keeps_folder

__all__ = ["register", "cmd_export"]


def register(sub: argparse._SubParsersAction) -> None:
    from twotower.cli.main import add_no_verify

    p = sub.add_parser("export", help="export the user and item towers (ONNX) and the item embeddings (.npy)")
    p.add_argument("--run", required=True, help="run folder to export")
    p.add_argument("--format", default="onnx", choices=["onnx"], help="export format (default onnx)")
    p.add_argument("--out", required=True, help="folder for user_tower.onnx, item_tower.onnx, item_embeddings.npy, "
                                                "item_ids.json, user_ids.json, export.json (and, for a dual-head run "
                                                "with cold items, cold_similar_queries.npy: their similar-items "
                                                "queries); replaced as a whole (an earlier export there is removed, "
                                                "with a warning listing it)")
    p.add_argument("--force", action="store_true",
                   help="replace --out even when it holds files no export wrote (they are removed)")
    p.add_argument("--check-users", type=int, default=1000,
                   help="users whose vectors onnxruntime must reproduce within 1e-5 (default 1000; all items always)")
    p.add_argument("--threads", type=int, help="torch threads (default: TWOTOWER_THREADS or torch's)")
    add_no_verify(p)
    p.set_defaults(func=cmd_export)


@sigterm_keeps_folder  # SIGTERM mid-export: its temporary folder removed, one line on what --out holds, 143
def cmd_export(args: argparse.Namespace) -> int:
    from twotower.cli.flags import _threads
    from twotower.cli.paths import check_output_dir, run_writer
    from twotower.export.folder import CLI_LABELS, check_export_dir
    from twotower.utils.run_folder import check_run_folder

    from twotower.cli.flags import check_range

    check_range("--check-users", args.check_users, 1)
    out = check_output_dir(args.out, swapped=True)  # written beside --out and swapped in whole
    check_export_dir(out, run_dir=args.run, force=args.force, labels=CLI_LABELS)  # before loading the run: a refused --out costs nothing
    check_run_folder(args.run)  # a wrong folder is one line at once, not after torch is imported
    from twotower.export import export_onnx
    from twotower.pipeline.artifacts import TrainedRun

    _threads(args)
    with run_writer(args.run, out, "twotower export"):  # `--out RUN/onnx` writes into the run
        run = TrainedRun.load(args.run)
        r = export_onnx(run, out, check_users=args.check_users, force=args.force, labels=CLI_LABELS,
                        what="twotower export")
    print(f"exported {args.run} to {out}: user_tower.onnx (inputs {', '.join(r.user_inputs)}), item_tower.onnx, "
          f"item_embeddings.npy ({r.n_items_checked} items) with item_ids.json; onnxruntime reproduces PyTorch to "
          f"{max(r.max_abs_diff_user, r.max_abs_diff_item):.1e} on {r.n_users_checked} users and all items"
          + (f"; a user not in training is user_rows={r.new_user_row}, read with its features missing (their "
             f"values are no input: export.json's new_user_features)" if r.new_user_row is not None else "")
          # a new user's feature values: the other graph, encoded as export.json says
          + (f"; new_user_tower.onnx takes a new user's encoded feature values (inputs {', '.join(r.new_user_inputs)}; "
             f"export.json's new_user_tower.encoding)" if r.new_user_inputs else "")
          # a cold item's similar-items query is not its row of item_embeddings.npy: say where it is
          + (f"; cold_similar_queries.npy holds the similar-items queries of {r.n_cold_similar} items without "
             f"training interactions (export.json's cold_similar)" if r.n_cold_similar else ""))
    return 0
