#!/usr/bin/env python3
"""Checks tools/export-module-tree's "kernel_layers" (which module classes, and functions inside
them, use_kernels gives a Hub kernel, under which layer name) against the `kernels` library's
own marks.

The tool reads the names from transformers' source, because without a `kernels` that
transformers accepts its decorators do nothing. Here, in a child process, transformers'
integration is switched on with the pinned kernels (transformers 5.24 asks for >= 0.18.2, which
PyPI does not have; 0.17.2's decorators are the same API), so that kernels' decorators set
kernel_layer_name on each class and attach the functions; the tool then reads those marks. For
every causal LM and T5 built from its config class's defaults, both answers must be equal.

Usage: kernel_layers_check.py            (exit 0 when equal, 1 with the differences)
       kernel_layers_check.py --marks    (child: the marks as JSON on stdout)
"""

import importlib.machinery
import importlib.util
import json
import logging
import os
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools", "export-module-tree",
                    "export-module-tree")


def enable_kernels():
    """transformers' hub-kernel integration on, with the installed kernels."""
    import transformers.utils as utils
    import transformers.utils.import_utils as import_utils

    import_utils.is_kernels_available = utils.is_kernels_available = lambda *a, **k: True
    from transformers.integrations import hub_kernels

    if not hub_kernels._kernels_enabled or not hasattr(hub_kernels, "kernelize"):
        raise SystemExit("kernel_layers_check: the integration did not switch on")


def answers():
    """{model_type: the tool's kernel_layers, or "refused"} over every architecture."""
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    sys.path.insert(0, HERE)
    import architecture_oracle as oracle
    import torch

    loader = importlib.machinery.SourceFileLoader("export_module_tree", TOOL)
    spec = importlib.util.spec_from_loader("export_module_tree", loader)
    tool = importlib.util.module_from_spec(spec)
    loader.exec_module(tool)
    out = {}
    for model_type in oracle.model_types():
        try:
            config = oracle.small_config(model_type)
            _, auto = oracle.auto_class(model_type)
            with torch.device("meta"):
                model = auto.from_config(config)
        except Exception:  # transformers cannot build its own defaults: not a case
            out[model_type] = "refused"
            continue
        out[model_type] = tool.kernel_layers(model)
    return out


def main():
    if sys.argv[1:] == ["--marks"]:
        enable_kernels()
        json.dump(answers(), sys.stdout)
        return 0
    from_source = answers()
    child = subprocess.run([sys.executable, __file__, "--marks"], check=True,
                           stdout=subprocess.PIPE, text=True)
    from_marks = json.loads(child.stdout)
    built = [t for t, a in from_source.items() if a != "refused"]
    differ = [t for t in from_source if from_source[t] != from_marks.get(t)]
    for model_type in differ:
        print(f"{model_type}: source {from_source[model_type]} but kernels marks "
              f"{from_marks.get(model_type)}")
    layers = {name for t in built for name in from_source[t]["layers"].values()}
    if not layers or "RMSNorm" not in layers:
        print("no kernel layers found at all: the source reading is broken")
        return 1
    print(f"kernel layers of {len(built)} architectures: {len(built) - len(differ)} equal to the "
          f"kernels library's marks ({len(layers)} layer names)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
