"""The docker cluster backend: Spark master and workers as containers of an image ftctl builds.

Everything here imports the Docker SDK lazily, so ``import ftctl`` and the local backend
work without a Docker engine or the ``docker`` package.
"""
