"""models/ is a folder, not a package: the package inside it is `mha_viz_models`
(models/mha_viz_models/, installed by `make install`). Importing `models.mha_viz_models.X` would
load the same files a second time, as other classes, so it is refused."""

raise ImportError("models/ is not a package: import mha_viz_models (models/mha_viz_models/), "
                  "installed by `make install`")
