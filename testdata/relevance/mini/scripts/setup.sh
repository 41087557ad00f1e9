#!/bin/sh
# Install the dependencies and build the project from a fresh checkout.
set -e
apt-get install -y build-essential
make all
