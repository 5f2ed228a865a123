"""Scripts that maintain the repository's documents; they are not part of the installed specviz
package and run from the repository root (`python -m tools.report`)."""
