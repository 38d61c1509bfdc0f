// SPDX-License-Identifier: BSD-3-Clause
int main() { return 0; }
