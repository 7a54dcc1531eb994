"""Evaluation: rules over subjects, into findings; the speed-ups proven equal to it.

* ``evaluator``: the plain path, what running a rule means (match, condition,
  variables, violations or validations), with no speed knob;
* ``stamp``: a rule's results stamped into findings (id, level, location, message);
* ``plan``: what each rule needs to run, worked out once per run;
* ``optimize/``: the speed-ups, each a transform of a rule's plan;
* ``fast``: what a run calls: the plan, and the processes that share the work;
* ``loop``: the fast path's loop over a share of the subjects;
* ``shipping``: a share of the workloads evaluated in the helper process.
"""
