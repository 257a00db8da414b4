"""The restart plan of :meth:`Cluster.modify`: which components a change touches, the checks made
before anything stops, the binary swaps in the saved command lines, and the options that undo them.

The saved command lines are changed in place: a later restart (``restart_ended``, the next
``modify``) runs what the last one ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from e2e_dra.localupcluster._commandline import binary_index, replace_binary, require_executable
from e2e_dra.localupcluster._components import KUBE_CLUSTER_COMPONENTS
from e2e_dra.localupcluster._errors import ClusterError
from e2e_dra.localupcluster._gates import merge_feature_gates
from e2e_dra.localupcluster.cmd import Cmd


@dataclass
class ModifyOptions:
    """What :meth:`Cluster.modify` changes; the result of a modify undoes its binary changes."""

    bin_dir: Path | None = None
    file_by_component: dict[str, Path] = field(default_factory=dict)
    feature_gates_by_component: dict[str, str] = field(default_factory=dict)

    def component_file(self, component: str) -> Path | None:
        if component in self.file_by_component:
            return Path(self.file_by_component[component])
        if self.bin_dir is not None:
            return Path(self.bin_dir) / component
        return None


class RestartPlan:
    """The components ``options`` touches, in start order (stopped in reverse), checked on
    creation: one that does not run, or a new binary that is missing or cannot replace the old one
    in its command line, fails the plan before anything stops. ``undo`` collects the swapped-out
    binaries."""

    def __init__(
        self, options: ModifyOptions, running: Mapping[str, Cmd], argv: dict[str, list[str]]
    ) -> None:
        self._options = options
        self._argv = argv
        self.undo = ModifyOptions()
        self.components = [
            c
            for c in KUBE_CLUSTER_COMPONENTS
            if options.component_file(c) or options.feature_gates_by_component.get(c)
        ]
        for component in self.components:
            if component not in running:
                raise ClusterError(f"cannot modify {component}: it is not running")
            new_file = options.component_file(component)
            if new_file is not None:
                require_executable(new_file, component)
                binary_index(argv[component], component)  # fails before anything stops

    def swap_binary(self, component: str) -> None:
        """Put the new binary (if any) into ``component``'s saved command line, noting the old one
        in :attr:`undo`; once the component has stopped."""
        new_file = self._options.component_file(component)
        if new_file is not None:
            self.undo.file_by_component[component] = replace_binary(
                self._argv[component], component, new_file
            )

    def restart_argv(self, component: str) -> list[str]:
        """The command line to start ``component`` again with: the saved one, its feature gates
        (if the options change them) merged in and saved."""
        gates = self._options.feature_gates_by_component.get(component)
        if gates:
            self._argv[component] = merge_feature_gates(self._argv[component], gates)
        return self._argv[component]
