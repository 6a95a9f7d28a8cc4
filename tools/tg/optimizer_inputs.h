#pragma once
// The inputs an optimizer pass adds to a training step graph (tensorgrad/passes/optimizer.h) are
// not free: its hyperparameter scalars (optim.beta2, optim.eps, optim.bias_correction2_sqrt, ...)
// decide whether the update is well conditioned, and Adam's second moment (<param>.adam.v) is read
// under sqrt. Uniform draws in [-2, 2) give a negative v (NaN on both sides, which passes a check
// while hiding any error) or a denominator near 0. tg run and tg check draw a Training's first step
// instead (docs/cli.md, "Inputs"): the scalars of step 1 and the zero state they go with.
#include <vector>

#include "tensorgrad/ir/graph.h"

namespace tg::cli {

// Rewrites `values`, the uniform draw of f32 input `input`, when the input is one an optimizer pass
// adds: an optim.* scalar gets its value from tg::scalars_for_step at step 1 with lr 1e-3 for the
// optimizer the graph's scalar inputs name (AdamW, Adam or SGD, with their default hyperparameters,
// SGD's momentum 0.9 and weight decay 1e-4 when the graph takes them, clipping at max_norm 1), rounded
// to float; a state input named <param>.adam.m, <param>.adam.v or <param>.sgd.momentum becomes 0,
// the state before a Training's first step. Other inputs are left alone.
void adjust_optimizer_input(const Graph& graph, const GraphInput& input, std::vector<float>& values);

}  // namespace tg::cli
