"""Sphinx configuration of the course site (read by Sphinx when cudalearn.course.site.render runs it)."""

from pathlib import Path

from cudalearn.course import colab, site

project = "cudalearn"
author = "the cudalearn authors"
release = colab.version()
html_title = "cudalearn: how CUDA powers deep learning"

extensions = ["myst_nb"]
nb_execution_mode = "off"  # cudalearn.course.site.execute ran the notebooks already, two at a time
nb_merge_streams = True  # one block per cell for its printed output, not one per print call
myst_enable_extensions = ["dollarmath", "amsmath"]
nb_render_markdown_format = "gfm"  # Markdown outputs (the claims tables) with tables; commonmark has none
exclude_patterns = ["_labs", ".doctrees", "**/.ipynb_checkpoints"]

html_theme = "sphinx_book_theme"
html_theme_options = {
    # The "Open in Colab" button: COLAB_HOST/github/ORG/REPO/blob/BRANCH/PAGE.ipynb, the very address
    # cudalearn.course.colab.colab_url gives (pages sit at their repository path, book/NN-name).
    "repository_url": colab.REPO,
    "repository_branch": f"v{colab.version()}",
    "path_to_docs": "",
    "launch_buttons": {"colab_url": site.COLAB_HOST},
    "use_download_button": True,
    "use_repository_button": True,
    "use_fullscreen_button": False,
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "navbar_persistent": [],  # else pydata-sphinx-theme adds a second search box in an empty top bar
}
html_context = {"default_mode": "auto"}  # unset, the theme's script logs an error on the first page
html_favicon = "static/favicon.svg"  # else browsers ask for /favicon.ico, a 404
html_static_path = ["static"]
html_css_files = ["cudalearn.css"]
html_show_copyright = False
mathjax_path = site.MATHJAX_JS  # relative: served from the site's own _static/, never a CDN


def _copy_mathjax(app, exception):
    if exception is None and app.builder.format == "html":
        site.copy_mathjax(Path(app.outdir))


def setup(app):
    app.connect("build-finished", _copy_mathjax)
