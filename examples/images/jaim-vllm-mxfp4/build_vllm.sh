#!/bin/sh
# vLLM from the pinned fork against the base's PyTorch: torch pins and FlashInfer (the
# component's) dropped from its requirement files as the recipe does, then compiled in place
# for the editable install (ccache kept between builds).
set -eu
python3 use_existing_torch.py
sed -i "/flashinfer/d" requirements/cuda.txt
python3 -m pip install --no-build-isolation --no-deps -r requirements/build.txt
python3 setup.py build_ext --inplace
